#!/usr/bin/env node
/**
 * Fails when two folders of lib/ import each other, directly or around a circle, so the layout
 * keeps showing the design (each folder is a layer that the ones above it use). Files directly in
 * lib/ count as one folder, "lib/"; a sub-folder counts with its first-level folder. Only value
 * imports count: `import type` and `export type` are erased at compile time.
 *
 * Usage (from the repository root): node .ci/folder-cycles.mjs — part of `npm run lint`.
 */
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve('lib');

/** Every .ts file under dir, declaration files left out. */
function sources(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(file);
    return /\.ts$/.test(entry.name) && !/\.d\.ts$/.test(entry.name) ? [file] : [];
  });
}

/** The folder of lib/ a file belongs to. */
function folderOf(file) {
  const parts = path.relative(root, file).split(path.sep);
  return parts.length > 1 ? `lib/${parts[0]}/` : 'lib/';
}

/** The file a relative specifier names (an extensionless path, a .js path, or a folder). */
function targetOf(from, specifier) {
  const base = path.resolve(path.dirname(from), specifier);
  const tries = [base.replace(/\.js$/, '.ts'), `${base}.ts`, path.join(base, 'index.ts')];
  return tries.find((file) => fs.existsSync(file) && fs.statSync(file).isFile()) ?? `${base}.ts`;
}

const valueImport =
  /^\s*(?:import|export)\s+(type\s+)?[^'"]*?from\s+['"](\.[^'"]+)['"]|^\s*import\s+['"](\.[^'"]+)['"]/gm;

/** folder -> folder -> the file pairs behind that edge. */
const edges = new Map();
for (const file of sources(root)) {
  for (const match of fs.readFileSync(file, 'utf8').matchAll(valueImport)) {
    if (match[1]) continue;
    const target = targetOf(file, match[2] ?? match[3]);
    if (!target.startsWith(root + path.sep)) continue;
    const [a, b] = [folderOf(file), folderOf(target)];
    if (a === b) continue;
    if (!edges.has(a)) edges.set(a, new Map());
    const pairs = edges.get(a).get(b) ?? [];
    pairs.push(`${path.relative(root, file)} -> ${path.relative(root, target)}`);
    edges.get(a).set(b, pairs);
  }
}

// Tarjan's strongly connected components: each one of more than one folder is a cycle.
const order = new Map();
const low = new Map();
const stack = [];
const cycles = [];
function visit(folder) {
  order.set(folder, order.size);
  low.set(folder, order.get(folder));
  stack.push(folder);
  for (const next of edges.get(folder)?.keys() ?? []) {
    if (!order.has(next)) {
      visit(next);
      low.set(folder, Math.min(low.get(folder), low.get(next)));
    } else if (stack.includes(next)) {
      low.set(folder, Math.min(low.get(folder), order.get(next)));
    }
  }
  if (low.get(folder) !== order.get(folder)) return;
  const component = stack.splice(stack.indexOf(folder));
  if (component.length > 1) cycles.push(component.sort());
}
for (const folder of edges.keys()) if (!order.has(folder)) visit(folder);

if (cycles.length === 0) {
  console.log('folder-cycles: no folder cycle in lib/');
  process.exit(0);
}
for (const cycle of cycles) {
  console.error(`folder-cycles: ${cycle.join(' <-> ')} import each other:`);
  for (const a of cycle) {
    for (const [b, pairs] of edges.get(a) ?? []) {
      if (cycle.includes(b)) for (const pair of pairs) console.error(`  lib/${pair}`);
    }
  }
}
console.error(
  'Move the file that belongs elsewhere into the folder it serves, or make the import type-only ' +
    '(docs/development.md, "Layout").',
);
process.exit(1);
