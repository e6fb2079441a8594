/**
 * The manual's options tables and the defaults objects say the same thing: every option has a
 * row, every row is an option, and every default cell matches the code. The tables:
 * docs/options.md (the module's options and the TypeORM store's),
 * docs/operations-and-jobs.md (the options of operations in phases), docs/webhooks.md
 * (`@IdempotentWebhook()`'s own options) and docs/microservices.md (`@IdempotentMessage()`'s).
 */
import { normaliseScope } from '../../lib/utils/request-scope';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../lib';
import { DEFAULT_TYPEORM_STORE_OPTIONS } from '../../lib/storage/typeorm';
import { DEFAULT_IDEMPOTENCY_PHASES_OPTIONS } from '../../lib/phases';
import { DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS } from '../../lib/webhooks';
import { DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS } from '../../lib/microservices';
import { markdown, namedRows } from '../shared/markdown';

/** The first table under `heading` in `file`: option name → its default cell. */
function optionsTable(file: string, heading: string): Map<string, string> {
  const defaults = new Map<string, string>();
  for (const [name, cells] of namedRows(file, heading)) defaults.set(name, cells[0]);
  return defaults;
}

function flatDefaults(): Map<string, unknown> {
  const flat = new Map<string, unknown>();
  for (const [name, value] of Object.entries(DEFAULT_IDEMPOTENCY_OPTIONS)) {
    const groups = ['request', 'execution', 'wait', 'responses', 'errors', 'purge', 'replayCache'];
    if (groups.includes(name)) {
      for (const [sub, v] of Object.entries(value as object)) flat.set(`${name}.${sub}`, v);
    } else flat.set(name, value);
  }
  return flat;
}

describe('the options table of docs/options.md', () => {
  let table: Map<string, string>;
  // In a hook, so that a missing heading fails these tests and not the file.
  beforeAll(() => {
    table = optionsTable('docs/options.md', '## Every option');
  });
  const defaults = flatDefaults();

  it('has one row per option and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual([...defaults.keys()].sort());
  });

  it.each([...flatDefaults().entries()])('documents the default of %s', (name, value) => {
    const cell = table.get(name)!;
    if (name === 'responses.storeStatuses') {
      const except = cell.split('except')[1].match(/\d{3}/g)!.map(Number);
      const expected = [];
      for (let s = 200; s < 500; s++) if (!except.includes(s)) expected.push(s);
      expect(cell.startsWith('2xx, 3xx, 4xx except')).toBe(true);
      expect(value).toEqual(expected);
    } else if (name === 'request.scope') {
      const scope = (req: unknown) => normaliseScope((value as (req: unknown) => unknown)(req));
      expect(cell).toBe("`req.user?.id` when present, else `''`");
      expect(scope({ user: { id: 7 } })).toBe('7');
      expect(scope({})).toBe('');
    } else if (name === 'responses.replayHeaders') {
      // Too wide for the table: the sentence under it lists them.
      expect(cell).toBe('below');
      const list = (value as string[]).map((v) => `\`${v}\``).join(', ');
      const text = markdown('docs/options.md').text.replace(/\s+/g, ' ');
      expect(text).toContain(`\`responses.replayHeaders\` defaults to ${list}.`);
    } else if (Array.isArray(value)) {
      expect(cell).toBe(value.length ? value.map((v) => `\`${v}\``).join(', ') : '`[]`');
    } else {
      expect(cell).toBe(`\`${String(value)}\``);
    }
  });
});

describe("the TypeORM store's options table of docs/options.md", () => {
  let table: Map<string, string>;
  beforeAll(() => {
    table = optionsTable('docs/options.md', "## The TypeORM store's options");
  });

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

describe('the options table of docs/operations-and-jobs.md (operations in phases)', () => {
  let table: Map<string, string>;
  beforeAll(() => {
    table = optionsTable('docs/operations-and-jobs.md', '## Options');
  });
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

describe("the options table of docs/webhooks.md (@IdempotentWebhook()'s own options)", () => {
  let table: Map<string, string>;
  beforeAll(() => {
    table = optionsTable('docs/webhooks.md', '## Options');
  });
  const { toleranceSeconds, stripe, standardWebhooks, hmac } = DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS;
  const code = (value: string | number) => `\`${value}\``;

  it('has one row per option and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual(
      [
        'provider',
        'signature',
        'secrets',
        'key',
        'unsignedKeyHeader',
        'signature.toleranceSeconds',
        'signature.header',
        'signature.headers',
        'signature.prefix',
        'signature.encoding',
      ].sort(),
    );
    for (const required of ['provider', 'signature', 'secrets']) {
      expect(table.get(required)).toBe('required');
    }
  });

  it('documents the defaults of DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS', () => {
    expect(table.get('signature.toleranceSeconds')).toBe(code(toleranceSeconds));
    expect(table.get('signature.header')).toBe(
      `${code(stripe.header)} (stripe), ${code(hmac.header)} (hmac)`,
    );
    expect(table.get('signature.headers')).toBe(
      Object.values(standardWebhooks.headers).map(code).join(', '),
    );
    expect(table.get('signature.prefix')).toBe(code(hmac.prefix));
    expect(table.get('signature.encoding')).toBe(code(hmac.encoding));
  });
});

describe("the options table of docs/microservices.md (@IdempotentMessage()'s own options)", () => {
  let table: Map<string, string>;
  beforeAll(() => {
    table = optionsTable('docs/microservices.md', '## Options');
  });
  const { key, ack, scope } = DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS;

  it('has one row per option and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual(
      Object.keys(DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS).sort(),
    );
  });

  it('documents the defaults of DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS', () => {
    expect(table.get('key')).toBe(`\`{ field: '${key.field}' }\``);
    expect(table.get('ack')).toBe(`\`${ack}\``);
    const message = { kind: 'event', pattern: '<pattern>', data: {}, context: {} } as const;
    expect(table.get('scope')).toBe(`\`${scope(message)}\``);
  });
});
