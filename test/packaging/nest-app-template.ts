/**
 * Generates a fresh Nest application offline, the way `nest new` does, from the
 * @nestjs/schematics application templates this folder owns (templates/, see README.md): each
 * file rendered with the schematic's options, `__specFileSuffix__` in names replaced.
 */
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const TEMPLATES = join(__dirname, 'templates');

/** The three applications a user of the package starts from. */
export type AppKind = 'nest12-esm' | 'nest12-cjs' | 'nest11-cjs';

export const APP_KINDS: AppKind[] = ['nest12-esm', 'nest12-cjs', 'nest11-cjs'];

/** What `nest new` passes the schematic (its defaults), with TypeScript's strict mode on. */
function schematicOptions(name: string): Record<string, unknown> {
  return {
    name,
    version: '0.0.1',
    description: '',
    author: '',
    strict: true,
    observe: false,
    specFileSuffix: 'spec',
    packageManager: 'npm',
  };
}

/**
 * Renders the template language of @angular-devkit/schematics' `template()` that these files
 * use: `<%= expression %>` and `<% statement %>`.
 */
export function renderTemplate(text: string, options: Record<string, unknown>): string {
  let body = "let out = '';\n";
  let last = 0;
  for (const match of text.matchAll(/<%(=?)([\s\S]*?)%>/g)) {
    body += `out += ${JSON.stringify(text.slice(last, match.index))};\n`;
    body += match[1] ? `out += String(${match[2]});\n` : `${match[2]}\n`;
    last = match.index + match[0].length;
  }
  body += `out += ${JSON.stringify(text.slice(last))};\nreturn out;`;
  const render = new Function(...Object.keys(options), body) as (...args: unknown[]) => string;
  return render(...Object.values(options));
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

/**
 * Writes the application `kind` into `target` (which must not hold another app).
 * @returns the paths written, relative to `target`
 */
export function generateApp(kind: AppKind, target: string, name: string): string[] {
  const source = join(TEMPLATES, kind);
  const options = schematicOptions(name);
  return filesUnder(source).map((file) => {
    const path = relative(source, file)
      .replace(/\.template$/, '')
      .replace(/__specFileSuffix__/g, String(options.specFileSuffix));
    mkdirSync(dirname(join(target, path)), { recursive: true });
    writeFileSync(join(target, path), renderTemplate(readFileSync(file, 'utf8'), options));
    return path;
  });
}

/** Renders one of the test's own templates (templates/*.template outside the app folders). */
export function renderOwnTemplate(name: string, options: Record<string, unknown>): string {
  return renderTemplate(readFileSync(join(TEMPLATES, `${name}.template`), 'utf8'), options);
}
