/**
 * Every page runs as written (docs/development.md, "Docs that run").
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { manualFiles, markdown, section } from '../shared/markdown';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { composeApp, pageFiles, writeApp } from '../fixtures/docs-app';
import { startDocsApp } from '../fixtures/docs-app-process';
import type { DocsAppProcess } from '../fixtures/docs-app-process';
import { PROVIDER_CHARGES_TABLE, withRecordingProvider } from '../fixtures/docs-provider';
import { DocsTypeChecker } from '../fixtures/docs-typecheck';
import { waitFor } from '../fixtures/wait-for';

jest.setTimeout(180_000);

const PAGES = process.env.DOCS_RUN_PAGES?.split(',') ?? ['README.md', ...manualFiles()];

/** Pages that do not type-check yet, and why: each runs as `it.failing` until it does. */
const KNOWN_GAPS: Record<string, string> = {};

describe('every page, pasted into a fresh Nest 12 ESM app over the README Usage files', () => {
  let checker: DocsTypeChecker;
  beforeAll(() => {
    checker = new DocsTypeChecker();
  });

  const typeChecks = (page: string) => {
    const files = composeApp(page, 'nest12-esm');
    const dir = writeApp(files, 'module');
    try {
      const problems = [...pageFiles(page).problems, ...checker.check(dir, files)];
      expect(problems).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const checked = PAGES.filter((page) => !(page in KNOWN_GAPS));
  it.each(checked)('%s type-checks', typeChecks);
  const gaps = PAGES.filter((page) => page in KNOWN_GAPS);
  if (gaps.length) it.failing.each(gaps)('%s does not type-check yet (KNOWN_GAPS)', typeChecks);
});

/** The page whose heading is `heading` (whichever file it lives in). */
function pageWith(heading: string): string {
  const pages = PAGES.filter((page) =>
    markdown(page).headings.some((h) => `${'#'.repeat(h.level)} ${h.text}` === heading),
  );
  if (pages.length !== 1) throw new Error(`"${heading}" is on ${pages.length} pages`);
  return pages[0];
}

/** The app of `page` written for a run, the README's provider swapped for the recording one. */
function runnableApp(page: string): string {
  const files = composeApp(page, 'nest12-cjs').map((file) =>
    file.path === 'src/payments.support.ts'
      ? { ...file, source: withRecordingProvider(file.source) }
      : file,
  );
  return writeApp(files, 'commonjs');
}

describe('the worked examples, run on PostgreSQL', () => {
  let db: TestDatabase;
  let dir: string | undefined;
  const apps: DocsAppProcess[] = [];

  beforeEach(async () => {
    db = await createTestDatabase();
    await db.query(PROVIDER_CHARGES_TABLE);
  });

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.kill()));
    if (dir) rmSync(dir, { recursive: true, force: true });
    await db.drop();
  });

  it('operations: kill -9 during the provider call, restart, retry: it resumes once', async () => {
    dir = runnableApp('docs/operations-and-jobs.md');
    const env = { DATABASE_URL: db.url };
    const crashing = await startDocsApp(dir, { ...env, DOCS_RUN_HANG_AFTER_CHARGE: '1' });
    apps.push(crashing);
    const post = (url: string) =>
      fetch(`${url}/payments`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'key_1', // the README's ApiKeyGuard: account acct_1
          'idempotency-key': 'order-1',
        },
        body: JSON.stringify({ amount: 1000, currency: 'eur' }),
      });
    const lost = post(crashing.url).catch((error: Error) => error);
    await crashing.printed(/provider charged/, 30_000);
    await crashing.kill('SIGKILL');
    expect(String(await lost)).toMatch(/fetch failed/); // the client got no answer
    // Step 1 committed, the charge made, its answer lost.
    expect(await db.query('SELECT charge_id FROM payments')).toEqual([{ charge_id: null }]);

    const restarted = await startDocsApp(dir, env);
    apps.push(restarted);
    // Until the crashed run's lease lapses the key is in flight: 409 with Retry-After.
    let answer = await post(restarted.url);
    const deadline = Date.now() + 100_000;
    while (answer.status === 409 && Date.now() < deadline) {
      const wait = Number(answer.headers.get('retry-after') ?? '1');
      await new Promise((done) => setTimeout(done, Math.min(wait, 5) * 1000));
      answer = await post(restarted.url);
    }
    const body = await answer.text();
    expect([answer.status, JSON.parse(body)]).toEqual([
      201,
      { id: expect.any(Number), chargeId: 'ch_1', status: 'succeeded' },
    ]);
    const replay = await post(restarted.url);
    expect([replay.status, replay.headers.get('idempotent-replayed'), await replay.text()]).toEqual(
      [201, 'true', body],
    );
    expect(await db.query('SELECT count(*)::int AS n FROM provider_charges')).toEqual([{ n: 1 }]);
    expect(await db.query('SELECT charge_id FROM payments')).toEqual([{ charge_id: 'ch_1' }]);
    await waitFor(async () => (await db.query('SELECT 1 FROM receipts')).length === 1, 30_000);
  });

  it('webhooks: the signed delivery sent twice by hand makes one row', async () => {
    const page = pageWith('### Sending a signed delivery by hand');
    dir = runnableApp(page);
    const secret = { STRIPE_WEBHOOK_SECRET: 'whsec_test_secret' };
    const app = await startDocsApp(dir, { DATABASE_URL: db.url, ...secret });
    apps.push(app);
    const script = section(markdown(page), '### Sending a signed delivery by hand');
    const send = markdown(page).blocks.find(
      (block) =>
        block.lang === 'bash' &&
        block.line >= script[0].line &&
        block.line <= script[script.length - 1].line &&
        block.code.includes('curl'),
    );
    expect(send).toBeDefined();
    const run = spawnSync('bash', ['-e', '-c', send!.code.replaceAll('localhost:3000', app.url)], {
      encoding: 'utf8',
      env: { ...process.env, ...secret },
    });
    expect(run.status).toBe(0);
    const answers = run.stdout.split(/^HTTP\/1\.1 /m).slice(1);
    expect(answers.map((answer) => answer.slice(0, 3))).toEqual(['200', '200']);
    expect(answers.map((answer) => /^idempotent-replayed: true/im.test(answer))).toEqual([
      false,
      true,
    ]);
    expect(await db.query('SELECT event_id, type FROM webhook_events')).toEqual([
      { event_id: 'evt_1', type: 'payment_intent.succeeded' },
    ]);
  });

  it("routes: a duplicate sent with Prefer: wait gets the first request's answer, replayed", async () => {
    const page = pageWith('# Waiting for the first request');
    dir = runnableApp(page);
    const app = await startDocsApp(dir, { DATABASE_URL: db.url });
    apps.push(app);
    // The page's handler answers at once: to have a duplicate find its key in flight, the test
    // holds every update of the records table (the completion among them) behind a lock of its own.
    await db.query(`CREATE FUNCTION docs_run_hold() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$`);
    await db.query(`CREATE TRIGGER docs_run_hold BEFORE UPDATE ON idempotency_records
      FOR EACH ROW EXECUTE FUNCTION docs_run_hold()`);
    await db.query('SELECT pg_advisory_lock(4242)');
    const post = (prefer?: string) =>
      fetch(`${app.url}/payments`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': 'key_1',
          'idempotency-key': 'order-1001',
          ...(prefer ? { prefer } : {}),
        },
        body: JSON.stringify({ amount: 1999 }),
      });
    const first = post();
    const held = async () =>
      (
        await db.query(
          "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'advisory' AND datname = current_database()",
        )
      ).length > 0;
    await waitFor(held, 30_000);
    let answered = false;
    const duplicate = post('wait=5').then((response) => ((answered = true), response));
    await new Promise((done) => setTimeout(done, 500));
    expect(answered).toBe(false); // it waits: no 409
    await db.query('SELECT pg_advisory_unlock(4242)');
    const [one, two] = await Promise.all([first, duplicate]);
    const body = await one.text();
    expect([one.status, JSON.parse(body)]).toEqual([201, { id: 'pay_1', amount: 1999 }]);
    expect([
      two.status,
      two.headers.get('idempotent-replayed'),
      two.headers.get('preference-applied'),
      await two.text(),
    ]).toEqual([201, 'true', 'wait=5', body]);
  });
});
