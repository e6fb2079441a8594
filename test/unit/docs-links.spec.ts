/**
 * Every relative link of the README, the manual (docs/**\/*.md, without the generated docs/api/)
 * and the other Markdown pages leads somewhere on GitHub: its file or directory exists and its
 * anchor is a heading of the target page, by GitHub's anchor rules. So does every reference to a
 * page that the code's comments make in plain text (docs/design/contract.md#the-key,
 * bench/README.md), read from the repository's root. A link to this repository's main branch on
 * GitHub (package.json's `repository`) is checked as the repository path it names: the README
 * links that way, since docs/ is not in the package and its relative links would be dead on the
 * npm page. Other http(s) and mailto links are not followed.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import {
  anchors,
  filesUnder,
  GithubSlugger,
  manualFiles,
  markdown,
  markdownLinks,
  parseMarkdown,
  repoPath,
  ROOT,
} from '../shared/markdown';
import type { MarkdownDocument } from '../shared/markdown';

/** The Markdown pages whose links are checked, repository-relative. */
const PAGES = [
  'README.md',
  'BENCHMARKS.md',
  'RELIABILITY.md',
  'bench/README.md',
  'test/chaos/README.md',
  'test/packaging/README.md',
  ...manualFiles(),
];

/** The repository on GitHub, from package.json's `repository` (no `git+`, no `.git`). */
const REPOSITORY = String(
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).repository.url,
).replace(/^git\+|\.git$/g, '');

/**
 * The repository path (`/docs/x.md#anchor`) that a link to the repository's main branch on GitHub
 * names, or undefined for any other link.
 */
function inRepository(destination: string): string | undefined {
  for (const kind of ['blob', 'tree']) {
    const prefix = `${REPOSITORY}/${kind}/main`;
    if (destination === prefix) return '/';
    if (destination.startsWith(`${prefix}/`)) return destination.slice(prefix.length);
  }
  return undefined;
}

/** The code whose comments refer to pages. */
const CODE_DIRS = ['lib', 'test', 'sample-app', 'bench'];
/** This file: its fixtures are broken on purpose. */
const SELF = 'test/unit/docs-links.spec.ts';

/**
 * What is wrong with `destination`, a link of `from`, or undefined when it leads somewhere.
 * A link without a path (`#anchor`) is to `from` itself.
 */
function brokenLink(from: MarkdownDocument, link: string): string | undefined {
  const destination = inRepository(link) ?? link;
  if (/^(https?|mailto):/i.test(destination) || destination.startsWith('//')) return undefined;
  if (/^[a-z][a-z\d+.-]*:/i.test(destination)) return 'not a relative link, nor http(s) or mailto';
  const hash = destination.indexOf('#');
  const rawPath = (hash < 0 ? destination : destination.slice(0, hash)).replace(/\?.*$/, '');
  const anchor = hash < 0 ? undefined : destination.slice(hash + 1);
  let path: string;
  try {
    path = decodeURI(rawPath);
  } catch {
    return 'the path is not valid percent-encoding';
  }

  let target = from;
  if (path) {
    const absolute = path.startsWith('/') ? join(ROOT, path) : join(ROOT, dirname(from.file), path);
    const file = repoPath(absolute);
    if (file === '..' || file.startsWith('../') || relative(ROOT, absolute).startsWith('..')) {
      return 'points outside the repository';
    }
    if (!existsSync(absolute)) return `no such file or directory (${file || '.'})`;
    const directory = statSync(absolute).isDirectory();
    if (path.endsWith('/') && !directory) return `${file} is a file, not a directory`;
    if (anchor === undefined || anchor === '') return undefined;
    if (directory) return `${file} is a directory: it has no #${anchor}`;
    if (!file.endsWith('.md')) {
      // GitHub's line anchors (#L10, #L10-L20) are the only ones a code file has.
      return /^L\d+(C\d+)?(-L\d+(C\d+)?)?$/.test(anchor)
        ? undefined
        : `${file} is not a Markdown page: it has no #${anchor}`;
    }
    target = markdown(file);
  }
  if (anchor === undefined || anchor === '') return undefined;
  let decoded: string;
  try {
    decoded = decodeURIComponent(anchor);
  } catch {
    return 'the anchor is not valid percent-encoding';
  }
  const offered = anchors(target);
  if (offered.has(decoded)) return undefined;
  return `${target.file} has no heading #${decoded} (its anchors: ${[...offered].join(', ')})`;
}

/** `<file>:<line>: <link> → <what is wrong>` for each broken relative link of `doc`. */
function brokenLinks(doc: MarkdownDocument): string[] {
  return markdownLinks(doc).flatMap(({ destination, line }) => {
    const problem = brokenLink(doc, destination);
    return problem ? [`${doc.file}:${line}: ${destination} → ${problem}`] : [];
  });
}

/**
 * The same for the pages a source file's text names from the repository root
 * (`docs/….md#anchor`, `bench/README.md`); a URL's path (`…/blob/main/docs/x.md`) is not one.
 */
function brokenReferences(file: string, text: string): string[] {
  const root = markdown('README.md'); // any page at the root: its links read from there
  return text.split('\n').flatMap((line, index) =>
    [...line.matchAll(/(?<![\w/.-])(?:docs\/[\w./-]*?|bench\/README)\.md(?:#[\w-]+)?/g)].flatMap(
      ([reference]) => {
        const problem = brokenLink(root, reference);
        return problem ? [`${file}:${index + 1}: ${reference} → ${problem}`] : [];
      },
    ),
  );
}

describe('GitHub heading anchors', () => {
  it.each([
    ['Options', 'options'],
    ["The TypeORM store's options", 'the-typeorm-stores-options'],
    ['Health check (`@nestjs/terminus`)', 'health-check-nestjsterminus'],
    ['1. Register the module and create the table', '1-register-the-module-and-create-the-table'],
    ['Where a crash can happen, and who finishes', 'where-a-crash-can-happen-and-who-finishes'],
    [
      '`IdempotencyContext.derivedKey()` and `snake_case`',
      'idempotencycontextderivedkey-and-snake_case',
    ],
    ['Nest 11 and Nest 12', 'nest-11-and-nest-12'],
    ['The [contract](design/contract.md) — in short', 'the-contract--in-short'],
    ['Über *fast* _retries_', 'über-fast-retries'],
  ])('%s → #%s', (heading, slug) => {
    expect(new GithubSlugger().slug(heading)).toBe(slug);
  });

  it('numbers a repeated heading', () => {
    const slugger = new GithubSlugger();
    expect(['Route styles', 'Route styles', 'Route styles'].map((h) => slugger.slug(h))).toEqual([
      'route-styles',
      'route-styles-1',
      'route-styles-2',
    ]);
  });
});

describe('the link check', () => {
  // docs/fixture.md, as if it were in docs/
  const fixture = parseMarkdown(
    'docs/fixture.md',
    [
      '# A page',
      '',
      '## Its options',
      '',
      'Fine: [options](#its-options), [errors](errors.md#codes), [the manual](./),',
      '[the README](../README.md), [a long',
      'link text](design/contract.md), [web](https://example.com/x.md#nope), [mail](mailto:a@b.c).',
      'Broken: [gone](missing.md), [anchor](#no-such-heading), [theirs](errors.md#nope),',
      '[code](../lib/index.ts#exports), [out](../../elsewhere.md), [dir](design#x).',
      '',
      '`[in a code span](missing.md)`',
      '',
      '```md',
      '[in a code block](missing.md)',
      '# A heading in a code block',
      '```',
      '',
      '[broken reference]: nowhere.md',
      '<a href="nowhere.html">html</a>',
      '',
      '[heading in a block](#a-heading-in-a-code-block)',
    ].join('\n'),
  );

  it('names each broken link with its line and what is wrong, and only those', () => {
    expect(brokenLinks(fixture)).toEqual([
      'docs/fixture.md:8: missing.md → no such file or directory (docs/missing.md)',
      expect.stringMatching(
        /^docs\/fixture\.md:8: #no-such-heading → docs\/fixture\.md has no heading #no-such-heading \(its anchors: a-page, its-options\)$/,
      ),
      expect.stringMatching(
        /^docs\/fixture\.md:8: errors\.md#nope → docs\/errors\.md has no heading #nope /,
      ),
      'docs/fixture.md:9: ../lib/index.ts#exports → lib/index.ts is not a Markdown page: it has no #exports',
      'docs/fixture.md:9: ../../elsewhere.md → points outside the repository',
      'docs/fixture.md:9: design#x → docs/design is a directory: it has no #x',
      'docs/fixture.md:18: nowhere.md → no such file or directory (docs/nowhere.md)',
      'docs/fixture.md:19: nowhere.html → no such file or directory (docs/nowhere.html)',
      expect.stringMatching(/^docs\/fixture\.md:21: #a-heading-in-a-code-block → /),
    ]);
  });

  it("checks a link to the repository's main branch on GitHub as the path it names", () => {
    const page = parseMarkdown(
      'README.md',
      [
        '# Readme',
        '',
        `[ok](${REPOSITORY}/blob/main/docs/errors.md), [dir](${REPOSITORY}/tree/main/docs),`,
        `[anchor](${REPOSITORY}/blob/main/docs/design/contract.md#the-key), [root](${REPOSITORY}/tree/main).`,
        `[gone](${REPOSITORY}/blob/main/docs/missing.md), [nope](${REPOSITORY}/blob/main/docs/errors.md#nope).`,
        `[another branch](${REPOSITORY}/blob/v0/docs/missing.md), [issues](${REPOSITORY}/issues).`,
      ].join('\n'),
    );
    expect(brokenLinks(page)).toEqual([
      `README.md:5: ${REPOSITORY}/blob/main/docs/missing.md → no such file or directory (docs/missing.md)`,
      expect.stringMatching(
        /^README\.md:5: .*\/docs\/errors\.md#nope → docs\/errors\.md has no heading #nope /,
      ),
    ]);
  });

  it("reads a comment's references from the repository root, but not a URL's path", () => {
    const source = [
      '// docs/design/contract.md#the-key and bench/README.md',
      '// see docs/nope.md, docs/errors.md#no-such-code',
      '// https://github.com/o/r/blob/main/docs/nope.md is not ours',
    ].join('\n');
    expect(brokenReferences('lib/x.ts', source)).toEqual([
      'lib/x.ts:2: docs/nope.md → no such file or directory (docs/nope.md)',
      expect.stringMatching(
        /^lib\/x\.ts:2: docs\/errors\.md#no-such-code → docs\/errors\.md has no heading #no-such-code /,
      ),
    ]);
  });
});

describe('links', () => {
  it.each(PAGES)('%s: every relative link leads to a file and heading', (page) => {
    expect(existsSync(join(ROOT, page))).toBe(true);
    expect(brokenLinks(markdown(page))).toEqual([]);
  });

  it.each(PAGES)(
    '%s: no two sections of the page share a title (a link reaches only the first)',
    (page) => {
      const titles = markdown(page)
        .headings.filter((heading) => heading.level <= 2)
        .map((heading) => heading.text);
      expect(titles.filter((title, i) => titles.indexOf(title) !== i)).toEqual([]);
    },
  );

  it(`code comments (${CODE_DIRS.join('/, ')}/) name pages and headings that exist`, () => {
    const problems = CODE_DIRS.flatMap((dir) =>
      filesUnder(dir, (path) => path.endsWith('.ts') && path !== SELF).flatMap((file) =>
        brokenReferences(file, readFileSync(join(ROOT, file), 'utf8')),
      ),
    );
    expect(problems).toEqual([]);
  });
});

describe('the manual', () => {
  /** The Markdown pages reachable from the README by following relative links, repo-relative. */
  function reachable(): Set<string> {
    const seen = new Set<string>();
    const queue = ['README.md'];
    while (queue.length > 0) {
      const page = queue.shift()!;
      if (seen.has(page)) continue;
      seen.add(page);
      for (const link of markdownLinks(markdown(page))) {
        const destination = inRepository(link.destination) ?? link.destination;
        if (/^[a-z][a-z\d+.-]*:/i.test(destination) || destination.startsWith('#')) continue;
        const path = destination.replace(/[#?].*$/, '');
        const target = repoPath(
          path.startsWith('/') ? join(ROOT, path) : join(ROOT, dirname(page), path),
        );
        const file = target.endsWith('.md') ? target : join(target, 'README.md');
        if (existsSync(join(ROOT, file)) && statSync(join(ROOT, file)).isFile()) queue.push(file);
      }
    }
    return seen;
  }

  it('links from the README to the repository by absolute URLs, which work on the npm page', () => {
    const relative = markdownLinks(markdown('README.md')).filter(
      ({ destination }) =>
        !/^[a-z][a-z\d+.-]*:/i.test(destination) &&
        !destination.startsWith('#') &&
        !destination.startsWith('//'),
    );
    expect(relative.map(({ destination, line }) => `README.md:${line}: ${destination}`)).toEqual(
      [],
    );
  });

  // 265: the Usage files include the authentication guard the scope is taken from.
  it('starts from a README short enough to read in a sitting (at most 265 lines)', () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length;
    expect(lines).toBeLessThanOrEqual(265);
  });

  it('has every page reachable from the README by its links', () => {
    const from = reachable();
    expect(manualFiles().filter((page) => !from.has(page))).toEqual([]);
  });
});
