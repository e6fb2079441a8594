/**
 * The README's "## Usage" code as a user pastes it into a new application: every `ts` block
 * whose first line names its file (`// src/app.module.ts`) is written there verbatim. The README
 * writes relative imports with `.js`, as a Nest 12 ESM application needs (and a CommonJS one
 * accepts); in an ESM app the test would add any it lacked. The README shows all four files the
 * app needs, `src/payments.support.ts` among them, so nothing of the test's replaces them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface UsageFile {
  /** path in the application, e.g. `src/payments.controller.ts` */
  path: string;
  source: string;
}

const README = join(__dirname, '../../README.md');

/** The fenced `ts` blocks of the README's "## Usage" section, in order. */
export function usageBlocks(readme = readFileSync(README, 'utf8')): string[] {
  const section = readme.split(/^## Usage$/m)[1]?.split(/^## /m)[0];
  if (!section) throw new Error('README.md has no "## Usage" section');
  return [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1]);
}

/**
 * The Usage blocks that are application files.
 * @param esm whether relative imports need the `.js` extension (a Nest 12 ESM app)
 */
export function usageFiles(esm: boolean, readme?: string): UsageFile[] {
  const files = usageBlocks(readme).flatMap((block) => {
    const path = /^\/\/ (src\/[\w./-]+\.ts)\n/.exec(block)?.[1];
    if (!path) return [];
    const source = esm ? block.replace(/(from '\.{1,2}\/[^']+?)(?<!\.js)'/g, "$1.js'") : block;
    return [{ path, source }];
  });
  const paths = files.map((file) => file.path);
  if (!paths.includes('src/app.module.ts')) {
    throw new Error(
      `README Usage: expected ts blocks headed "// src/<file>.ts", src/app.module.ts among them; ` +
        `found ${paths.join(', ') || 'none'}`,
    );
  }
  return files;
}
