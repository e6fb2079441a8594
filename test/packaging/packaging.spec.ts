/**
 * The packed library in the applications its users start from: a Nest 12 ESM app (the default
 * of `nest new`, with vitest), a Nest 12 `--type cjs` app (with jest) and a Nest 11 app (CommonJS),
 * each generated from the schematic's own template files (templates/). For each: `npm install`,
 * the README's install command with the tarball (no --legacy-peer-deps), the README's four Usage
 * files pasted as they are and built by the app's `nest build` with `strict: true`, then the app
 * started on a fresh PostgreSQL database and asked for a first request, its replay, a 422 and a
 * 409 (sent while the first request waits on a lock the test holds on its table). Then the core
 * alone: a Nest 12 ESM app that installs only the tarball (npm adds no TypeORM, no pg: they are
 * optional peers) and serves a replay on the memory store.
 *
 * Needs the npm registry (or a warm npm cache) and a PostgreSQL server (DATABASE_URL, as
 * `npm test`). Run with `npm run test:packaging`; KEEP_PACKAGING_APPS=1 keeps the apps.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'pg';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ConsumerApp, expectSuccess, packLibrary, workFolder } from './consumer-app';
import type { RunningApp } from './consumer-app';
import { APP_KINDS } from './nest-app-template';
import { usageFiles } from './readme-usage';

let work: string;
let tarball: string;

beforeAll(async () => {
  work = workFolder();
  tarball = await packLibrary(work);
}, 300_000);

afterAll(() => {
  if (work && !process.env.KEEP_PACKAGING_APPS) rmSync(work, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  const files = () =>
    execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map((path) => path.replace(/^package\//, ''));

  it('holds the built library, its typings, LICENSE and README, and nothing else', () => {
    const list = files();
    expect(list).toEqual(expect.arrayContaining(['LICENSE', 'README.md', 'package.json']));
    expect(list).toEqual(
      expect.arrayContaining(['dist/lib/index.js', 'dist/lib/index.d.ts', 'dist/lib/index.js.map']),
    );
    const unexpected = list.filter(
      (path) =>
        !['LICENSE', 'README.md', 'package.json'].includes(path) &&
        !/^dist\/lib\/.+\.(js|d\.ts|js\.map)$/.test(path),
    );
    expect(unexpected).toEqual([]);
  });

  it('holds the files of every entry point its exports map names', () => {
    const manifest = JSON.parse(
      execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }),
    );
    const targets = Object.entries(manifest.exports as Record<string, unknown>).flatMap(
      ([subpath, target]) =>
        typeof target === 'string'
          ? [[subpath, target]]
          : Object.values(target as Record<string, string>).map((file) => [subpath, file]),
    );
    const list = new Set(files());
    const missing = targets.filter(([, file]) => !list.has(file.replace(/^\.\//, '')));
    expect(targets.map(([subpath]) => subpath)).toEqual(
      expect.arrayContaining(['.', './microservices', './graphql', './webhooks', './cli']),
    );
    expect(missing).toEqual([]);
  });

  it('ships source maps that carry their sources', () => {
    const map = JSON.parse(
      execFileSync('tar', ['-xzOf', tarball, 'package/dist/lib/index.js.map'], {
        encoding: 'utf8',
      }),
    );
    expect(map.sourcesContent).toHaveLength(map.sources.length);
    expect(map.sourcesContent[0]).toContain('export {');
  });
});

/**
 * The steps of one scenario, each a test: after a failed step, the later ones fail saying so.
 * Call it once per describe block.
 */
function scenario() {
  let failed: string | undefined;
  return (name: string, body: () => Promise<void>, timeoutMs = 120_000) =>
    it(
      name,
      async () => {
        if (failed) throw new Error(`not run: the step "${failed}" failed`);
        try {
          await body();
        } catch (error) {
          failed = name;
          throw error;
        }
      },
      timeoutMs,
    );
}

/**
 * Takes an EXCLUSIVE lock on the app's `payments` table (reads go on, writes wait) on a
 * connection of its own, so that a request's handler stops at its write until `release()`.
 */
async function lockPaymentsTable(url: string): Promise<{ release: () => Promise<void> }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('LOCK TABLE payments IN EXCLUSIVE MODE');
  } catch (error) {
    await client.end();
    throw error;
  }
  return {
    release: async () => {
      try {
        await client.query('COMMIT');
      } finally {
        await client.end();
      }
    },
  };
}

/** Resolves once a session of the app waits for a lock on `payments`: a handler at its write. */
async function writeWaitingOnPayments(db: TestDatabase, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const [{ n }] = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity ' +
        "WHERE datname = current_database() AND wait_event_type = 'Lock' " +
        "AND query ILIKE '%payments%'",
    );
    if (n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no request waited to write to payments within ${timeoutMs} ms`);
}

describe.each(APP_KINDS)('a new %s application', (kind) => {
  let app: ConsumerApp;
  let db: TestDatabase;
  let running: RunningApp | undefined;
  const step = scenario();

  // Jest's CommonJS runtime loads ESM-only packages (Nest 12) only from Node 24.9: the Nest 12
  // `--type cjs` template's own Jest tests fail before that, with or without this library.
  const skipStep = (name: string) => it.skip(`${name} (needs Node >= 24.9)`, () => undefined);

  // As the README's curl: the API key its guard knows (account acct_1, the scope), a JSON body.
  const post = (key: string, body: object) =>
    fetch(`${running!.url}/payments`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'X-Api-Key': 'key_1',
        'Idempotency-Key': key,
      },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    app = new ConsumerApp(kind, work);
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await running?.stop();
    await db?.drop();
  });

  step(
    'installs its template dependencies (npm install)',
    async () => {
      expectSuccess(await app.generate(), 'npm install');
    },
    600_000,
  );

  step(
    'installs the tarball with its peers, without --legacy-peer-deps',
    async () => {
      const result = expectSuccess(await app.installLibrary(tarball), 'npm install <tarball>');
      expect(result.output).not.toMatch(/ERESOLVE|overriding peer dependency/);
      expect(app.version('@nestjs/core')).toMatch(kind.startsWith('nest12') ? /^12\./ : /^11\./);
      console.log(
        `${kind}: @nestjs/core ${app.version('@nestjs/core')}, ` +
          `@nestjs/typeorm ${app.version('@nestjs/typeorm')}, typeorm ${app.version('typeorm')}, ` +
          `pg ${app.version('pg')}, typescript ${app.version('typescript')}`,
      );
    },
    600_000,
  );

  step('builds the README Usage code, as pasted, with strict: true (nest build)', async () => {
    expectSuccess(await app.build(), 'nest build');
    const pasted = usageFiles();
    expect(pasted.map((file) => file.path)).toEqual([
      'src/app.module.ts',
      'src/payments.controller.ts',
      'src/payments.service.ts',
      'src/payments.support.ts',
    ]);
    for (const file of pasted) {
      expect(readFileSync(join(app.dir, file.path), 'utf8')).toBe(file.source);
    }
  });

  step('starts on a fresh PostgreSQL database and runs the migrations', async () => {
    running = await app.start({ DATABASE_URL: db.url });
    const tables = await db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    );
    expect(tables.map((row) => row.table_name)).toEqual(
      expect.arrayContaining(['idempotency_records', 'payments']),
    );
  });

  // The README's CreatePaymentDto, and the Payment the README's service answers with. Its stand-in
  // provider numbers charges in order: ch_1 (order-1), ch_2 (order-2), ch_3 (the client's).
  const payment = { amount: 1000, currency: 'eur' };
  let first: { status: number; body: Buffer };

  step('answers a first request with 201 and the payment', async () => {
    const response = await post('order-1', payment);
    first = { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
    expect(first.status).toBe(201);
    expect(response.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.parse(first.body.toString())).toEqual({
      id: expect.any(Number),
      ...payment,
      chargeId: 'ch_1',
    });
  });

  step('replays it: same status, same bytes, Idempotent-Replayed: true', async () => {
    const response = await post('order-1', payment);
    expect(response.status).toBe(first.status);
    expect(response.headers.get('idempotent-replayed')).toBe('true');
    expect(Buffer.from(await response.arrayBuffer()).equals(first.body)).toBe(true);
  });

  step('answers 422 to the same key with another payload', async () => {
    const response = await post('order-1', { ...payment, amount: 2000 });
    expect(response.status).toBe(422);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await response.json()).toMatchObject({ code: 'idempotency_key_reused' });
  });

  // The README's code runs as pasted: nothing in the app is slow on purpose. The test holds the
  // first request in its handler with a lock on the payments table, sends the duplicate, then
  // lets the first finish.
  step('answers 409 to a duplicate while the first is still running', async () => {
    const order = { amount: 4090, currency: 'eur' };
    const lock = await lockPaymentsTable(db.url);
    let firstAnswer: Promise<Response>;
    try {
      firstAnswer = post('order-2', order);
      await writeWaitingOnPayments(db);
      const duplicate = await post('order-2', order);
      expect(duplicate.status).toBe(409);
      expect(await duplicate.json()).toMatchObject({ code: 'idempotency_key_in_use' });
    } finally {
      await lock.release();
    }
    const response = await firstAnswer;
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ id: expect.any(Number), ...order, chargeId: 'ch_2' });
  });

  step(
    'nest-idempotency/client (built by the app) creates a payment, then gets its replay',
    async () => {
      const body = { id: expect.any(Number), amount: 1500, currency: 'eur', chargeId: 'ch_3' };
      expect(await app.runClient(running!.url)).toEqual([
        { status: 201, replayed: false, attempts: 1, sameKey: true, body },
        { status: 201, replayed: true, attempts: 1, sameKey: true, body },
      ]);
    },
  );

  step('ran each handler once: three payments, three completed records', async () => {
    expect(
      await db.query('SELECT amount, currency, charge_id FROM payments ORDER BY charge_id'),
    ).toEqual([
      { amount: 1000, currency: 'eur', charge_id: 'ch_1' },
      { amount: 4090, currency: 'eur', charge_id: 'ch_2' },
      { amount: 1500, currency: 'eur', charge_id: 'ch_3' },
    ]);
    expect(
      await db.query('SELECT status, count(*)::int AS n FROM idempotency_records GROUP BY 1'),
    ).toEqual([{ status: 'completed', n: 3 }]);
  });

  // Jest's CommonJS runtime loads ESM-only packages (Nest 12) only from Node 24.9 on: before
  // that, the Nest 12 `--type cjs` template's own tests fail on their first import, library or not.
  const [major, minor] = process.versions.node.split('.').map(Number);
  const runnerLoadsNest = kind !== 'nest12-cjs' || major > 24 || (major === 24 && minor >= 9);
  (runnerLoadsNest ? step : skipStep)(
    `passes an e2e spec in its own test runner (${kind.endsWith('esm') ? 'vitest' : 'jest'}), ` +
      'with @nestjs/schedule added: a replay, the purge in the SchedulerRegistry',
    async () => {
      await running?.stop();
      running = undefined;
      expectSuccess(await app.testE2e(db.url), 'npm run test:e2e');
    },
  );
});

describe('a new nest12-esm application on the core alone: no TypeORM, no pg', () => {
  let core: ConsumerApp;
  let running: RunningApp | undefined;
  const step = scenario();

  const post = (body: object) =>
    fetch(`${running!.url}/orders`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'o-1', 'X-Api-Key': 'k' },
      body: JSON.stringify(body),
    });

  beforeAll(() => {
    core = new ConsumerApp('nest12-esm', work, 'nest12-esm-core');
  });

  afterAll(async () => {
    await running?.stop();
  });

  step(
    'installs its template dependencies (npm install)',
    async () => {
      expectSuccess(await core.generate(), 'npm install');
    },
    600_000,
  );

  step(
    'installs the tarball alone: none of typeorm, @nestjs/typeorm, pg comes with it',
    async () => {
      const before = core.dependencies();
      const result = expectSuccess(await core.installCore(tarball), 'npm install <tarball>');
      expect(result.output).not.toMatch(/ERESOLVE|overriding peer dependency/);
      expect(core.dependencies()).toEqual([...before, 'nest-idempotency'].sort());
      expect(['typeorm', '@nestjs/typeorm', 'pg'].filter((name) => core.installed(name))).toEqual(
        [],
      );
    },
    600_000,
  );

  step('builds an app module on the memory store with strict: true (nest build)', async () => {
    expectSuccess(await core.buildCore(), 'nest build');
  });

  const order = { item: 'book' };
  let first: { status: number; body: Buffer };

  step('starts with no warning and answers a first request with 201', async () => {
    running = await core.start({ NODE_ENV: 'development' });
    const response = await post(order);
    first = { status: response.status, body: Buffer.from(await response.arrayBuffer()) };
    expect(first.status).toBe(201);
    expect(response.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.parse(first.body.toString())).toEqual({ item: 'book', run: 1 });
    expect(running.output()).not.toMatch(/\b(WARN|ERROR)\b/);
  });

  step('replays it (same status, same bytes, Idempotent-Replayed: true), ran once', async () => {
    const response = await post(order);
    expect(response.status).toBe(first.status);
    expect(response.headers.get('idempotent-replayed')).toBe('true');
    expect(Buffer.from(await response.arrayBuffer()).equals(first.body)).toBe(true);
    const runs = await fetch(`${running!.url}/orders/runs`);
    expect(await runs.json()).toEqual({ runs: 1 });
  });
});
