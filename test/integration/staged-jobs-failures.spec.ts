/**
 * Staged jobs whose failure is hard to record, on real PostgreSQL: a handler throwing text
 * PostgreSQL refuses (NUL), a handler whose connection the server closes
 * (`idle_in_transaction_session_timeout`), a handler that never settles, and one inside a
 * statement that outlives `jobs.timeoutSeconds` (its backend is ended). In each case the
 * other jobs are delivered exactly once, the failing job's attempts are counted up to dead, and
 * no drain (on this instance or another) is blocked by it.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject } from '@nestjs/common';
import { IdempotentJobHandler, IdempotencyJobs } from '../../lib/phases';
import type { IdempotencyJobHandlerInstance, StagedJob } from '../../lib/phases';
import type { IdempotencyPhasesModuleOptions } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS } from '../fixtures/phased-transfers';
import { createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

const JOBS = 'idempotency_records_jobs';
const DRAINER = Symbol('drainer label');

/** What the test-only job handlers saw, shared by every app of this file. */
const seen = {
  delivered: [] as Array<{ drainer: string; key: string; attempt: number }>,
  /** Signals the never-settling handler got. */
  signals: [] as AbortSignal[],
  /** Resolves when the never-settling handler has started. */
  hangStarted: undefined as undefined | (() => void),
  /** Lets every never-settling handler go, at the end. */
  releases: [] as Array<() => void>,
  /** Runs SQL outside the drainer (the test's own connection). */
  query: undefined as undefined | ((sql: string, values?: unknown[]) => Promise<any[]>),
  reset() {
    this.delivered.length = 0;
    this.signals.length = 0;
    this.hangStarted = undefined;
  },
};

/** Records each delivery. */
@IdempotentJobHandler('test.record')
class RecordJob implements IdempotencyJobHandlerInstance {
  constructor(@Inject(DRAINER) private readonly drainer: string) {}

  async handle(job: StagedJob): Promise<void> {
    seen.delivered.push({ drainer: this.drainer, key: job.key, attempt: job.attempt });
  }
}

/** Fails with an error whose text PostgreSQL cannot store as it is. */
@IdempotentJobHandler('test.nul')
class NulJob implements IdempotencyJobHandlerInstance {
  async handle(): Promise<void> {
    throw new Error('a\u0000b');
  }
}

/** Outlives `idle_in_transaction_session_timeout`: the server closes its connection. */
@IdempotentJobHandler('test.idle')
class IdleJob implements IdempotencyJobHandlerInstance {
  async handle(_job: StagedJob, manager: any): Promise<void> {
    const [{ pid }] = await manager.query('SELECT pg_backend_pid() AS pid');
    await manager.query("SET idle_in_transaction_session_timeout = '20ms'");
    // Idle in its transaction until the server has ended the session.
    while ((await seen.query!('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length) {
      await sleep(10);
    }
  }
}

/** Never settles (until the test lets it go). */
@IdempotentJobHandler('test.hang')
class HangJob implements IdempotencyJobHandlerInstance {
  handle(_job: StagedJob, _manager: unknown, signal: AbortSignal): Promise<void> {
    seen.signals.push(signal);
    seen.hangStarted?.();
    return new Promise((resolve) => seen.releases.push(resolve));
  }
}

/** Inside one long statement past `jobs.timeoutSeconds` (8 s against 0.5 s). */
@IdempotentJobHandler('test.sleep')
class SleepJob implements IdempotencyJobHandlerInstance {
  async handle(_job: StagedJob, manager: any): Promise<void> {
    await manager.query('SELECT pg_sleep(8)');
  }
}

const jobKey = (label: string) => createHash('sha256').update(label).digest('hex');

describe('staged jobs whose failure is hard to record', () => {
  let db: TestDatabase;
  let poisoned: TestApp;
  let hung: TestApp;
  let other: TestApp;

  const start = (drainer: string, jobs: IdempotencyPhasesModuleOptions['jobs']) =>
    createTestApp('express', db, {
      ...TRANSFERS,
      providers: [
        ...TRANSFERS.providers,
        RecordJob,
        NulJob,
        IdleJob,
        HangJob,
        SleepJob,
        { provide: DRAINER, useValue: drainer },
      ],
      phases: { completer: false, jobs },
    });

  beforeAll(async () => {
    db = await createTestDatabase();
    seen.query = (sql, values) => db.query(sql, values);
    const failFast = { enabled: false, maxAttempts: 3, backoffSeconds: 0, maxBackoffSeconds: 0 };
    // One after the other: each runs the migrations.
    poisoned = await start('poisoned', { ...failFast, batchSize: 5 });
    // A long backoff: a timed-out job is not due again within the test.
    const short = { enabled: false, batchSize: 5, timeoutSeconds: 0.5, backoffSeconds: 3_600 };
    hung = await start('hung', short);
    other = await start('other', short);
  });

  afterAll(async () => {
    for (const release of seen.releases) release();
    for (const t of [poisoned, hung, other]) await t?.close();
    await db?.drop();
  });

  beforeEach(async () => {
    await db.query(`DELETE FROM ${JOBS}`);
    seen.reset();
    for (const t of [poisoned, hung, other]) t.events.length = 0;
  });

  const insertJob = async (name: string, label: string): Promise<string> => {
    const [{ id }] = await db.query(
      `INSERT INTO ${JOBS} (name, args, job_key, origin_scope, origin_key)
       VALUES ($1, '{}'::jsonb, $2, 'test-scope', $3) RETURNING id::text AS id`,
      [name, jobKey(label), `origin-${label}`],
    );
    return id;
  };
  const jobRows = () =>
    db.query(`SELECT id::text AS id, name, status, attempts, last_error FROM ${JOBS} ORDER BY id`);
  const drain = (t: TestApp) => t.app.get(IdempotencyJobs).drain();

  it.each([
    ['throws an error with a NUL character in its text', 'test.nul'],
    ['outlives idle_in_transaction_session_timeout', 'test.idle'],
  ])(
    'a job whose handler %s fails alone: its batch-mates are delivered once, it goes dead after maxAttempts',
    async (_what, name) => {
      await insertJob('test.record', 'before');
      const failing = await insertJob(name, 'failing');
      await insertJob('test.record', 'after');

      const summaries = [];
      for (let i = 0; i < 3; i++) summaries.push(await drain(poisoned));
      expect(summaries).toEqual([
        { delivered: 2, failed: 1, dead: 0 },
        { delivered: 0, failed: 1, dead: 0 },
        { delivered: 0, failed: 1, dead: 1 },
      ]);
      expect(seen.delivered).toEqual([
        { drainer: 'poisoned', key: jobKey('before'), attempt: 1 },
        { drainer: 'poisoned', key: jobKey('after'), attempt: 1 },
      ]);
      const rows = await jobRows();
      expect(rows).toEqual([
        expect.objectContaining({ id: failing, name, status: 'dead', attempts: 3 }),
      ]);
      if (name === 'test.nul') expect(rows[0].last_error).toBe('ab');
      else expect(rows[0].last_error).toMatch(/\S/);
      const failed = poisoned.events.filter((e) => e.type === 'job_failed') as any[];
      expect(failed.map((e) => [e.id, e.attempt, e.dead])).toEqual([
        [failing, 1, false],
        [failing, 2, false],
        [failing, 3, true],
      ]);
      // Nothing left to deliver, nothing delivered again.
      expect(await drain(poisoned)).toEqual({ delivered: 0, failed: 0, dead: 0 });
      expect(seen.delivered).toHaveLength(2);
    },
  );

  it('a handler that never settles blocks no drain: it times out, aborts its signal, holds no lock and no connection', async () => {
    const hanging = await insertJob('test.hang', 'hanging');
    await insertJob('test.record', 'mate-1');
    await insertJob('test.record', 'mate-2');

    const started = new Promise<void>((resolve) => (seen.hangStarted = resolve));
    const first = drain(hung);
    await started;

    // Another instance delivers the hung job's batch-mates while it hangs.
    expect(await drain(other)).toEqual({ delivered: 2, failed: 0, dead: 0 });
    expect(seen.delivered.map((d) => [d.drainer, d.key])).toEqual([
      ['other', jobKey('mate-1')],
      ['other', jobKey('mate-2')],
    ]);

    // The hung instance's drain ends: the delivery timed out and is counted.
    expect(await first).toEqual({ delivered: 0, failed: 1, dead: 0 });
    expect(seen.signals).toHaveLength(1);
    expect(seen.signals[0].aborted).toBe(true);
    expect(String(seen.signals[0].reason)).toMatch(/did not settle within/);
    const [row] = await jobRows();
    expect(row).toMatchObject({ id: hanging, status: 'pending', attempts: 1 });
    expect(row.last_error).toMatch(/'test\.hang' did not settle within jobs\.timeoutSeconds/);
    const failed = hung.events.filter((e) => e.type === 'job_failed') as any[];
    expect(failed.map((e) => [e.id, e.attempt, e.dead])).toEqual([[hanging, 1, false]]);

    // Its transaction is gone: no connection is left idle in a transaction.
    const idleInTransaction = () =>
      db.query(
        `SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
      );
    for (let i = 0; i < 200 && (await idleInTransaction()).length > 0; i++) await sleep(10);
    expect(await idleInTransaction()).toEqual([]);

    // The instance drains on (the hung job waits out its backoff).
    await insertJob('test.record', 'later');
    expect(await drain(hung)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(seen.delivered.map((d) => [d.drainer, d.key])).toContainEqual(['hung', jobKey('later')]);
  });

  it('a handler inside a long statement times out: its connection ends, the timeout is recorded, the drain moves on', async () => {
    // PostgreSQL does not notice a closed socket while a statement runs: unless the library
    // ends the backend, the row stays locked until pg_sleep returns, and the failure cannot be
    // recorded in time.
    const id = await insertJob('test.sleep', 'sleeping');
    const started = performance.now();
    expect(await drain(hung)).toEqual({ delivered: 0, failed: 1, dead: 0 });
    // The timeout (0.5 s), then the wait for the row lock: far less than the 8 s statement.
    expect(performance.now() - started).toBeLessThan(4_000);

    const [row] = await jobRows();
    expect(row).toMatchObject({ id, status: 'pending', attempts: 1 });
    const named = /'test\.sleep' did not settle within jobs\.timeoutSeconds \(0\.5 s\)/;
    expect(row.last_error).toMatch(named);
    const failed = hung.events.filter((e) => e.type === 'job_failed') as any[];
    expect(failed.map((e) => [e.id, e.attempt, e.dead])).toEqual([[id, 1, false]]);
    expect(failed[0].error.message).toMatch(named);
    // The statement no longer runs.
    expect(
      await db.query(
        `SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query = 'SELECT pg_sleep(8)'`,
      ),
    ).toEqual([]);
  });
});
