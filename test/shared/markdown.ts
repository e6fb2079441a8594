/**
 * Reading the repository's Markdown the way GitHub renders it, for the tests that hold the docs to
 * the code: fenced code blocks (whose lines are not prose), headings and their anchors, and the
 * first table under a heading.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The repository's root directory. */
export const ROOT = join(__dirname, '../..');

/** A fenced code block (```` ``` ```` or `~~~`). */
export interface FencedBlock {
  /** the first word of the info string (`ts`, `bash`), or '' */
  lang: string;
  /** the lines between the fences, each ending in a newline */
  code: string;
  /** the 1-based line of the opening fence */
  line: number;
}

/** A heading outside code blocks. */
export interface Heading {
  level: number;
  /** its text as written, without the `#`s */
  text: string;
  /** its anchor on GitHub (`#` not included), duplicates numbered as GitHub does */
  slug: string;
  /** 1-based */
  line: number;
}

/** A Markdown file split into what GitHub renders as prose and as code. */
export interface MarkdownDocument {
  /** repository-relative path, with `/` */
  file: string;
  text: string;
  /** every line, with the lines of fenced code blocks (fences included) blanked */
  prose: string[];
  blocks: FencedBlock[];
  headings: Heading[];
}

const cache = new Map<string, MarkdownDocument>();

/** Reads and splits a Markdown file (`file` relative to the repository root), once per run. */
export function markdown(file: string): MarkdownDocument {
  let doc = cache.get(file);
  if (!doc) {
    doc = parseMarkdown(file, readFileSync(join(ROOT, file), 'utf8'));
    cache.set(file, doc);
  }
  return doc;
}

/** Splits Markdown text; `file` only names it. */
export function parseMarkdown(file: string, text: string): MarkdownDocument {
  const lines = text.split('\n');
  const prose: string[] = [];
  const blocks: FencedBlock[] = [];
  let open: { fence: string; indent: number; block: FencedBlock } | undefined;
  lines.forEach((line, index) => {
    if (open) {
      prose.push('');
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(line);
      if (close && close[1][0] === open.fence[0] && close[1].length >= open.fence.length) {
        blocks.push(open.block);
        open = undefined;
      } else {
        // A block inside a list item is indented: its code is not.
        open.block.code += line.replace(new RegExp(`^ {0,${open.indent}}`), '') + '\n';
      }
      return;
    }
    const start = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(line);
    if (start && !(start[2][0] === '`' && line.slice(start[0].length).includes('`'))) {
      prose.push('');
      open = {
        fence: start[2],
        indent: start[1].length,
        block: { lang: start[3], code: '', line: index + 1 },
      };
      return;
    }
    prose.push(line);
  });
  // An unclosed fence runs to the end of the file.
  if (open) blocks.push(open.block);
  return { file, text, prose, blocks, headings: headings(prose) };
}

/** The ATX headings (`## Options`) of the prose lines, with GitHub's anchors. */
function headings(prose: string[]): Heading[] {
  const slugs = new GithubSlugger();
  const found: Heading[] = [];
  prose.forEach((line, index) => {
    const match = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (!match) return;
    const text = match[2] ?? '';
    found.push({ level: match[1].length, text, slug: slugs.slug(text), line: index + 1 });
  });
  return found;
}

/** The text GitHub shows for a heading's inline Markdown, which its anchor is made from. */
function renderedText(markdownText: string): string {
  return (
    markdownText
      // code spans keep their content as written
      .split(/(`+[^`]*?`+)/)
      .map((part, i) => {
        if (i % 2) return part.replace(/^`+|`+$/g, '');
        return part
          .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
          .replace(/<[^>]+>/g, '') // HTML tags
          .replace(/\\([!-/:-@[-`{-~])/g, '$1') // backslash escapes
          .replace(/(^|[^\p{L}\p{N}])_+(?=\S)|(?<=\S)_+(?![\p{L}\p{N}])/gu, '$1') // _emphasis_
          .replace(/&(amp|lt|gt|quot|#39);/g, '');
      })
      .join('')
  );
}

/**
 * GitHub's heading anchors (github-slugger): lower-case; everything but letters, digits, marks,
 * spaces, hyphens and underscores removed (backticks, `'`, `.`, `(`, `)`, `@`, `/` …); each
 * space a hyphen; a repeated anchor gets `-1`, `-2`, …
 */
export class GithubSlugger {
  private readonly occurrences = new Map<string, number>();

  slug(headingMarkdown: string): string {
    const base = renderedText(headingMarkdown)
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    let slug = base;
    while (this.occurrences.has(slug)) {
      const count = this.occurrences.get(base)! + 1;
      this.occurrences.set(base, count);
      slug = `${base}-${count}`;
    }
    this.occurrences.set(slug, 0);
    return slug;
  }
}

/** A link of the prose: its destination as written (`path#anchor`, `#anchor`, a URL). */
export interface MarkdownLink {
  destination: string;
  /** 1-based: the line the destination is on */
  line: number;
}

/**
 * The links GitHub renders from a document's prose: inline links and images (`[text](path)`,
 * their text may run over several lines), reference definitions (`[name]: path`) and the
 * `href`/`src` of HTML `<a>` and `<img>`. Links in code blocks, code spans and HTML comments are
 * text, not links, and are left out.
 */
export function markdownLinks(doc: MarkdownDocument): MarkdownLink[] {
  // Blank what is not rendered as a link, keeping every offset (and so every line) in place.
  const blank = (text: string) => text.replace(/[^\n]/g, ' ');
  const prose = doc.prose
    .join('\n')
    .replace(/<!--[\s\S]*?-->/g, blank)
    .replace(/(?<!`)(`+)(?!`)((?:[^`\n]|\n(?!\n)|`(?!\1))+?)\1(?!`)/g, blank);
  const lineOf = (offset: number) => prose.slice(0, offset).split('\n').length;
  const links: MarkdownLink[] = [];
  const found = (destination: string, offset: number) =>
    links.push({ destination: destination.replace(/^<(.*)>$/, '$1'), line: lineOf(offset) });

  const inline =
    /!?\[(?:[^[\]\n]|\n(?!\n)|\[[^[\]\n]*\])*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g;
  for (const match of prose.matchAll(inline)) {
    found(match[1], match.index + match[0].lastIndexOf('](') + 2);
  }
  for (const match of prose.matchAll(/^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)/gm)) {
    found(match[1], match.index + match[0].length - match[1].length);
  }
  for (const match of prose.matchAll(/<(?:a|img)\b[^>]*?\s(?:href|src)\s*=\s*["']([^"']+)["']/gi)) {
    found(match[1], match.index);
  }
  return links.sort((a, b) => a.line - b.line);
}

/** The anchors a document offers: its headings' and its HTML `id`s and `<a name>`s. */
export function anchors(doc: MarkdownDocument): Set<string> {
  const found = new Set(doc.headings.map((heading) => heading.slug));
  for (const match of doc.prose
    .join('\n')
    .matchAll(/<[a-z][^>]*?\s(?:id|name)\s*=\s*["']([^"']+)["']/gi)) {
    found.add(match[1]);
  }
  return found;
}

/**
 * The prose lines under `heading` (`'## Options'`: its level and text exactly), up to the next
 * heading of the same or a higher level. Throws, naming the file, if the heading is not there
 * exactly once.
 */
export function section(doc: MarkdownDocument, heading: string): { line: number; text: string }[] {
  const [, hashes, text] = /^(#+) (.*)$/.exec(heading) ?? [];
  if (!hashes) throw new Error(`not a Markdown heading: ${heading}`);
  const matches = doc.headings.filter((h) => h.level === hashes.length && h.text === text);
  if (matches.length !== 1) {
    const others = doc.headings.map((h) => `${'#'.repeat(h.level)} ${h.text}`).join(' | ');
    throw new Error(
      `${doc.file} has ${matches.length ? 'more than one' : 'no'} heading "${heading}" ` +
        `(its headings: ${others})`,
    );
  }
  const start = matches[0].line;
  const next = doc.headings.find((h) => h.line > start && h.level <= hashes.length);
  const end = next ? next.line - 1 : doc.prose.length;
  return doc.prose.slice(start, end).map((line, i) => ({ line: start + 1 + i, text: line }));
}

/** One row of a Markdown table: its cells, trimmed, `\|` left as written. */
export interface TableRow {
  cells: string[];
  /** 1-based */
  line: number;
}

/** Splits a table line into its cells (Prettier pads them, so split on the unescaped pipes). */
export function tableCells(line: string): string[] {
  const trimmed = line
    .trim()
    .replace(/^\|/, '')
    .replace(/(?<!\\)\|$/, '');
  return trimmed.split(/(?<!\\)\|/).map((cell) => cell.trim());
}

/**
 * The first table under `heading` in `file` (repository-relative, or already read): its header
 * cells and its rows
 * (the delimiter row left out). Throws, naming the file and heading, when there is none.
 */
export function firstTable(
  file: string | MarkdownDocument,
  heading: string,
): { header: string[]; rows: TableRow[] } {
  const doc = typeof file === 'string' ? markdown(file) : file;
  const lines = section(doc, heading);
  const delimiter = /^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$/;
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i].text.trim().startsWith('|') || !delimiter.test(lines[i + 1].text.trim())) {
      continue;
    }
    const rows: TableRow[] = [];
    for (let j = i + 2; j < lines.length && lines[j].text.trim().startsWith('|'); j++) {
      rows.push({ cells: tableCells(lines[j].text), line: lines[j].line });
    }
    return { header: tableCells(lines[i].text), rows };
  }
  throw new Error(`${doc.file} has no table under "${heading}"`);
}

/**
 * The rows of the first table under `heading` in `file` whose first cell is one name in
 * backticks (`` `ttlSeconds` ``, `` `purge.enabled` ``): name → the row's other cells.
 */
export function namedRows(file: string | MarkdownDocument, heading: string): Map<string, string[]> {
  const rows = new Map<string, string[]>();
  for (const { cells } of firstTable(file, heading).rows) {
    const name = /^`([\w.]+)`$/.exec(cells[0] ?? '');
    if (name) rows.set(name[1], cells.slice(1));
  }
  return rows;
}

/**
 * The manual: docs/**\/*.md, without docs/api/ (generated), repository-relative and sorted.
 */
export function manualFiles(): string[] {
  return filesUnder('docs', (path) => path.endsWith('.md'), ['docs/api']);
}

/**
 * The files under `dir` (repository-relative) that `accept`, skipping node_modules and the
 * `skip` directories; repository-relative, sorted.
 */
export function filesUnder(dir: string, accept: (path: string) => boolean, skip: string[] = []) {
  const found: string[] = [];
  const walk = (path: string) => {
    if (!existsSync(join(ROOT, path))) return;
    for (const entry of readdirSync(join(ROOT, path), { withFileTypes: true })) {
      const child = `${path}/${entry.name}`;
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && !skip.includes(child)) walk(child);
      } else if (accept(child)) found.push(child);
    }
  };
  walk(dir);
  return found.sort();
}

/** `path` (absolute) relative to the repository root, with `/`. */
export function repoPath(path: string): string {
  return relative(ROOT, path).split('\\').join('/');
}
