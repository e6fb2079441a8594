/**
 * The README's options table and DEFAULT_IDEMPOTENCY_OPTIONS say the same thing: every option
 * has a row, every row is an option, and every default cell matches the code.
 */
import { normaliseScope } from '../../lib/utils/request-scope';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../lib';
import { DEFAULT_TYPEORM_STORE_OPTIONS } from '../../lib/storage/typeorm';
import { DEFAULT_IDEMPOTENCY_PHASES_OPTIONS } from '../../lib/phases';

/** The rows of the first table under `heading` in the README: option name → default cell. */
function optionsTable(heading = /^## Options$/m, end = /^##+ /m): Map<string, string> {
  const readme = readFileSync(join(__dirname, '../../README.md'), 'utf8');
  const section = readme.split(heading)[1].split(end)[0];
  const rows = new Map<string, string>();
  for (const line of section.split('\n')) {
    // Prettier pads table cells, so split on the pipes rather than matching spaces.
    const cells = line
      .trim()
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim());
    const name = /^`([\w.]+)`$/.exec(cells[0] ?? '');
    if (name && cells.length === 3) rows.set(name[1], cells[1]);
  }
  return rows;
}

function flatDefaults(): Map<string, unknown> {
  const flat = new Map<string, unknown>();
  for (const [name, value] of Object.entries(DEFAULT_IDEMPOTENCY_OPTIONS)) {
    if (['purge', 'replayCache', 'phases', 'completer', 'jobs'].includes(name)) {
      for (const [sub, v] of Object.entries(value as object)) flat.set(`${name}.${sub}`, v);
    } else flat.set(name, value);
  }
  return flat;
}

describe('README options table', () => {
  const table = optionsTable();
  const defaults = flatDefaults();

  it('has one row per option and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual([...defaults.keys()].sort());
  });

  it.each([...flatDefaults().entries()])('documents the default of %s', (name, value) => {
    const cell = table.get(name)!;
    if (name === 'storeStatuses') {
      const except = cell.split('except')[1].match(/\d{3}/g)!.map(Number);
      const expected = [];
      for (let s = 200; s < 500; s++) if (!except.includes(s)) expected.push(s);
      expect(cell.startsWith('2xx, 3xx, 4xx except')).toBe(true);
      expect(value).toEqual(expected);
    } else if (name === 'scope') {
      const scope = (req: unknown) => normaliseScope((value as (req: unknown) => unknown)(req));
      expect(cell).toBe("`req.user?.id` when present, else `''`");
      expect(scope({ user: { id: 7 } })).toBe('7');
      expect(scope({})).toBe('');
    } else if (Array.isArray(value)) {
      expect(cell).toBe(value.length ? value.map((v) => `\`${v}\``).join(', ') : '`[]`');
    } else {
      expect(cell).toBe(`\`${String(value)}\``);
    }
  });
});

describe("README table of the TypeORM store's options", () => {
  const table = optionsTable(/^### The TypeORM store's options$/m, /^## /m);

  it('has one row per option and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual(
      [...Object.keys(DEFAULT_TYPEORM_STORE_OPTIONS), 'dataSource'].sort(),
    );
    expect(table.get('dataSource')).toBe('the default DataSource');
  });

  it.each(Object.entries(DEFAULT_TYPEORM_STORE_OPTIONS))(
    'documents the default of %s',
    (name, value) => {
      expect(table.get(name)).toBe(`\`${String(value)}\``);
    },
  );
});

describe('README table of the options of operations in phases', () => {
  const table = optionsTable(/^### The options of operations in phases$/m);
  const defaults = new Map<string, unknown>();
  for (const [name, value] of Object.entries(DEFAULT_IDEMPOTENCY_PHASES_OPTIONS)) {
    if (typeof value === 'object') {
      for (const [sub, v] of Object.entries(value)) defaults.set(`${name}.${sub}`, v);
    } else defaults.set(name, value);
  }

  it('has one row per option and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual([...defaults.keys()].sort());
  });

  it.each([...defaults.entries()])('documents the default of %s', (name, value) => {
    expect(table.get(name)).toBe(`\`${String(value)}\``);
  });
});
