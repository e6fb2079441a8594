/**
 * Staged jobs (docs/design/contract.md#operations-in-phases) on real PostgreSQL: the drainer delivers a job whose lower id commits
 * after a higher one, never lets two drainers hold one job, retries a failing handler with
 * backoff and then keeps it as dead (listed, retried, deleted by a human), counts and redelivers
 * with the same key a delivery whose connection or process died, gives a step's jobs distinct
 * documented keys, and a job staged by a step exists exactly when that step committed.
 */
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject } from '@nestjs/common';
import { Client } from 'pg';
import request from 'supertest';
import { IdempotentJobHandler, IdempotencyJobs } from '../../lib/phases';
import { IdempotencyStore } from '../../lib';
import type { IdempotencyJobHandlerInstance, StagedJob } from '../../lib/phases';
import type { IdempotencyPhasesModuleOptions } from '../../lib/phases';
import type { StagedJobStore } from '../../lib/phases/jobs/staged-job.store';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import { createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

const JOBS = 'idempotency_records_jobs';
const DRAINER = Symbol('drainer label');

/** What the test-only job handlers saw, shared by every app of this file. */
const seen = {
  delivered: [] as Array<{ drainer: string; id: string; key: string; attempt: number }>,
  inFlight: new Map<string, string>(),
  /** Keys a second delivery started on while the first was still running. */
  overlaps: [] as string[],
  peak: 0,
  delayMs: 0,
  failing: true,
  reset() {
    this.delivered.length = 0;
    this.inFlight.clear();
    this.overlaps.length = 0;
    this.peak = 0;
    this.delayMs = 0;
    this.failing = true;
  },
};

/** Records each delivery; takes `seen.delayMs`; notes any key delivered twice at once. */
@IdempotentJobHandler('test.record')
class RecordJob implements IdempotencyJobHandlerInstance {
  constructor(@Inject(DRAINER) private readonly drainer: string) {}

  async handle(job: StagedJob): Promise<void> {
    if (seen.inFlight.has(job.key)) seen.overlaps.push(job.key);
    seen.inFlight.set(job.key, this.drainer);
    seen.peak = Math.max(seen.peak, seen.inFlight.size);
    try {
      if (seen.delayMs > 0) await sleep(seen.delayMs);
      seen.delivered.push({
        drainer: this.drainer,
        id: job.id,
        key: job.key,
        attempt: job.attempt,
      });
    } finally {
      seen.inFlight.delete(job.key);
    }
  }
}

/** Throws while `seen.failing`; records the delivery otherwise. */
@IdempotentJobHandler('test.flaky')
class FlakyJob implements IdempotencyJobHandlerInstance {
  constructor(@Inject(DRAINER) private readonly drainer: string) {}

  async handle(job: StagedJob): Promise<void> {
    if (seen.failing) throw new Error(`flaky handler failed on attempt ${job.attempt}`);
    seen.delivered.push({ drainer: this.drainer, id: job.id, key: job.key, attempt: job.attempt });
  }
}

const jobKey = (label: string) => createHash('sha256').update(label).digest('hex');

describe('staged jobs on PostgreSQL', () => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let deadLetters: TestApp;
  let backoff: TestApp;
  let hooks: TransferHooks;
  let n = 0;
  const key = () => `jobs-${++n}`;

  const start = (drainer: string, jobs: IdempotencyPhasesModuleOptions['jobs']) =>
    createTestApp('express', db, {
      ...TRANSFERS,
      providers: [
        ...TRANSFERS.providers,
        RecordJob,
        FlakyJob,
        { provide: DRAINER, useValue: drainer },
      ],
      phases: { completer: false, jobs },
    });

  beforeAll(async () => {
    db = await createTestDatabase();
    // One after the other: each runs the migrations.
    a = await start('a', { enabled: false, batchSize: 5 });
    b = await start('b', { enabled: false, batchSize: 5 });
    deadLetters = await start('dead-letters', {
      enabled: false,
      batchSize: 5,
      maxAttempts: 3,
      backoffSeconds: 0,
      maxBackoffSeconds: 0,
    });
    backoff = await start('backoff', {
      enabled: false,
      maxAttempts: 5,
      backoffSeconds: 3_600,
      maxBackoffSeconds: 5_400,
    });
    hooks = a.app.get(TransferHooks);
    await db.query("SET lock_timeout = '5s'");
  });

  afterAll(async () => {
    for (const t of [a, b, deadLetters, backoff]) await t?.close();
    await db?.drop();
  });

  beforeEach(async () => {
    await db.query(`DELETE FROM ${JOBS}`);
    seen.reset();
    hooks.before.clear();
    hooks.providerAnswers.length = 0;
    hooks.afterSend = undefined;
    hooks.afterStage = undefined;
    hooks.onNotify = undefined;
    for (const t of [a, b, deadLetters, backoff]) t.events.length = 0;
  });

  /** Inserts a job row (through `client` when given) and returns its id. */
  const insertJob = async (name: string, label: string, client?: Client): Promise<string> => {
    const sql = `INSERT INTO ${JOBS} (name, args, job_key, origin_scope, origin_key)
                 VALUES ($1, $2::jsonb, $3, 'test-scope', $4) RETURNING id::text AS id`;
    const values = [name, JSON.stringify({ label }), jobKey(label), `origin-${label}`];
    const rows = client ? (await client.query(sql, values)).rows : await db.query(sql, values);
    return rows[0].id;
  };
  const jobRows = () =>
    db.query(`SELECT id::text AS id, name, job_key, status, attempts, last_error,
                     run_after > now() AS later, EXTRACT(EPOCH FROM run_after - now()) AS wait_s
                FROM ${JOBS} ORDER BY id`);
  const drain = (t: TestApp) => t.app.get(IdempotencyJobs).drain();

  it('delivers a job whose lower id commits after a higher one has been delivered', async () => {
    const late = new Client({ connectionString: db.url });
    const early = new Client({ connectionString: db.url });
    await late.connect();
    await early.connect();
    try {
      await late.query('BEGIN');
      const lowId = await insertJob('test.record', 'late', late);
      const highId = await insertJob('test.record', 'early', early);
      expect(BigInt(lowId)).toBeLessThan(BigInt(highId));

      expect(await drain(a)).toEqual({ delivered: 1, failed: 0, dead: 0 });
      expect(seen.delivered.map((d) => d.id)).toEqual([highId]);
      expect(await db.query(`SELECT count(*)::int AS n FROM ${JOBS}`)).toEqual([{ n: 0 }]);

      await late.query('COMMIT');
      expect(await drain(a)).toEqual({ delivered: 1, failed: 0, dead: 0 });
      expect(seen.delivered.map((d) => [d.id, d.key])).toEqual([
        [highId, jobKey('early')],
        [lowId, jobKey('late')],
      ]);
      expect(await jobRows()).toEqual([]);
    } finally {
      await late.end();
      await early.end();
    }
  });

  it('never lets two drainers hold one job: 50 jobs, each delivered once, none twice at once', async () => {
    await db.query(
      `INSERT INTO ${JOBS} (name, args, job_key, origin_scope, origin_key)
       SELECT 'test.record', jsonb_build_object('n', g),
              encode(sha256(('concurrent-' || g)::bytea), 'hex'), 'test-scope', 'origin-' || g
         FROM generate_series(1, 50) g`,
    );
    seen.delayMs = 10;
    const [first, second] = await Promise.all([drain(a), drain(b)]);

    expect(seen.overlaps).toEqual([]);
    expect(seen.delivered).toHaveLength(50);
    expect(new Set(seen.delivered.map((d) => d.key)).size).toBe(50);
    expect(first.delivered + second.delivered).toBe(50);
    expect(first.failed + second.failed).toBe(0);
    // Both drained, at the same time.
    expect(first.delivered).toBeGreaterThan(0);
    expect(second.delivered).toBeGreaterThan(0);
    expect(seen.peak).toBe(2);
    expect(await jobRows()).toEqual([]);
  });

  it('records a failure on a second try when the first recording meets a dead connection', async () => {
    // The pool may hand the failure's record the very connection the failure killed, before
    // its reset is noticed (read ECONNRESET): the record is tried once more.
    const id = await insertJob('test.flaky', 'recorded-late');
    const jobs = (a.app.get(IdempotencyStore).capabilities() as any).jobs;
    const fail = jest.spyOn(jobs, 'fail');
    fail.mockRejectedValueOnce(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }));
    try {
      expect(await drain(a)).toEqual({ delivered: 0, failed: 1, dead: 0 });
      expect(fail).toHaveBeenCalledTimes(2);
    } finally {
      fail.mockRestore();
    }
    const [row] = await jobRows();
    expect(row).toMatchObject({ id, status: 'pending', attempts: 1, later: true });
    expect(row.last_error).toBe('flaky handler failed on attempt 1');
  });

  it('retries a failing handler, keeps it as dead after maxAttempts, and lets a human retry it', async () => {
    const id = await insertJob('test.flaky', 'dead-one');
    const summaries = [];
    for (let i = 0; i < 3; i++) summaries.push(await drain(deadLetters));
    expect(summaries).toEqual([
      { delivered: 0, failed: 1, dead: 0 },
      { delivered: 0, failed: 1, dead: 0 },
      { delivered: 0, failed: 1, dead: 1 },
    ]);
    const [row] = await jobRows();
    expect(row).toMatchObject({ id, status: 'dead', attempts: 3 });
    expect(row.last_error).toBe('flaky handler failed on attempt 3');
    const failed = deadLetters.events.filter((e) => e.type === 'job_failed') as any[];
    expect(failed.map((e) => [e.id, e.key, e.attempt, e.dead])).toEqual([
      [id, jobKey('dead-one'), 1, false],
      [id, jobKey('dead-one'), 2, false],
      [id, jobKey('dead-one'), 3, true],
    ]);
    expect(failed.every((e) => e.error instanceof Error)).toBe(true);

    // Dead jobs are not taken again.
    expect(await drain(deadLetters)).toEqual({ delivered: 0, failed: 0, dead: 0 });
    const jobs = deadLetters.app.get(IdempotencyJobs);
    const dead = await jobs.listDeadJobs();
    expect(dead).toEqual([
      {
        id,
        name: 'test.flaky',
        args: { label: 'dead-one' },
        key: jobKey('dead-one'),
        attempts: 3,
        lastError: 'flaky handler failed on attempt 3',
        origin: { scope: 'test-scope', key: 'origin-dead-one' },
        createdAt: expect.any(Date),
        updatedAt: expect.any(Date),
      },
    ]);

    expect(await jobs.retryDeadJob(id)).toBe(true);
    expect(await jobs.retryDeadJob(id)).toBe(false); // pending now, not dead
    expect(await jobs.listDeadJobs()).toEqual([]);
    expect(await jobRows()).toEqual([
      expect.objectContaining({ id, status: 'pending', attempts: 0, later: false }),
    ]);
    seen.failing = false;
    expect(await drain(deadLetters)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(seen.delivered).toEqual([
      { drainer: 'dead-letters', id, key: jobKey('dead-one'), attempt: 1 },
    ]);
    expect(await jobRows()).toEqual([]);
  });

  it('gives a job that failed during a drain no second delivery in that drain, even with no backoff', async () => {
    // More failing jobs than one batch: the drain takes batch after batch, and without a cutoff
    // the jobs that failed in its first batches (due again at once) would be taken again, until
    // dead, in one drain.
    for (let i = 0; i < 12; i++) await insertJob('test.flaky', `cutoff-${i}`);
    expect(await drain(deadLetters)).toEqual({ delivered: 0, failed: 12, dead: 0 });
    expect((await jobRows()).map((row) => row.attempts)).toEqual(Array(12).fill(1));
  });

  it('deletes a dead job for good, and only a dead one', async () => {
    const deadId = await insertJob('test.flaky', 'to-delete');
    for (let i = 0; i < 3; i++) await drain(deadLetters);
    expect(await jobRows()).toEqual([expect.objectContaining({ id: deadId, status: 'dead' })]);
    const pendingId = await insertJob('test.record', 'pending');
    const jobs = deadLetters.app.get(IdempotencyJobs);

    expect(await jobs.deleteDeadJob(pendingId)).toBe(false);
    expect(await jobs.retryDeadJob(pendingId)).toBe(false);
    expect(await jobs.deleteDeadJob(deadId)).toBe(true);
    expect(await jobs.deleteDeadJob(deadId)).toBe(false);
    expect(await jobRows()).toEqual([
      expect.objectContaining({ id: pendingId, status: 'pending' }),
    ]);
  });

  it('backs off after a failure: a drain right after it does not redeliver; the wait is capped', async () => {
    const id = await insertJob('test.flaky', 'backing-off');
    expect(await drain(backoff)).toEqual({ delivered: 0, failed: 1, dead: 0 });
    let [row] = await jobRows();
    // Full jitter over backoffSeconds * 2^0 = 3600 s.
    expect(row).toMatchObject({ id, status: 'pending', attempts: 1, later: true });
    expect(Number(row.wait_s)).toBeLessThanOrEqual(3_600);

    expect(await drain(backoff)).toEqual({ delivered: 0, failed: 0, dead: 0 });
    expect((await jobRows())[0]).toMatchObject({ attempts: 1, later: true });

    // Time passes: due again; the second wait is capped at maxBackoffSeconds (5400 < 7200).
    for (let attempt = 2; attempt <= 3; attempt++) {
      await db.query(`UPDATE ${JOBS} SET run_after = now() - interval '1 second'`);
      expect(await drain(backoff)).toEqual({ delivered: 0, failed: 1, dead: 0 });
      [row] = await jobRows();
      expect(row).toMatchObject({ attempts: attempt, later: true, status: 'pending' });
      expect(Number(row.wait_s)).toBeLessThanOrEqual(5_400);
    }
    expect(backoff.events.filter((e) => e.type === 'job_failed')).toHaveLength(3);

    seen.failing = false;
    await db.query(`UPDATE ${JOBS} SET run_after = now() - interval '1 second'`);
    expect(await drain(backoff)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(seen.delivered).toEqual([
      { drainer: 'backoff', id, key: jobKey('backing-off'), attempt: 4 },
    ]);
  });

  it('counts a delivery whose connection died before its commit as failed, and redelivers it with the same key', async () => {
    const k = key();
    const created = await request(a.server)
      .post('/transfers')
      .set('Idempotency-Key', k)
      .send({ amount: 410, to: 'crash' });
    expect(created.status).toBe(201);
    const { ledgerId } = created.body;
    const [staged] = await db.query(`SELECT id::text AS id, job_key FROM ${JOBS}`);

    const deliveries: Array<{ key: string; attempt: number }> = [];
    let crashes = 0;
    hooks.onNotify = async (job, manager) => {
      deliveries.push({ key: job.key, attempt: job.attempt });
      if (crashes++ > 0) return;
      // The delivery's own connection dies after the handler ran, before the commit.
      const [{ pid }] = await manager.query('SELECT pg_backend_pid() AS pid');
      await db.query('SELECT pg_terminate_backend($1)', [pid]);
      while ((await db.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length) {
        await sleep(5);
      }
    };

    expect(await drain(a)).toEqual({ delivered: 0, failed: 1, dead: 0 });
    expect(deliveries).toEqual([{ key: staged.job_key, attempt: 1 }]);
    const [row] = await jobRows();
    expect(row).toMatchObject({ id: staged.id, status: 'pending', attempts: 1 });
    // How the killed connection is reported depends on timing (pg's termination notice, a reset
    // socket, TypeORM's released runner): some error is kept.
    expect(row.last_error).toMatch(/\S/);
    expect(a.events.filter((e) => e.type === 'job_failed')).toHaveLength(1);
    expect(await db.query('SELECT * FROM notifications WHERE ledger_id = $1', [ledgerId])).toEqual(
      [],
    );

    await db.query(`UPDATE ${JOBS} SET run_after = now() - interval '1 second'`); // backoff over
    expect(await drain(a)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(deliveries).toEqual([
      { key: staged.job_key, attempt: 1 },
      { key: staged.job_key, attempt: 2 },
    ]);
    expect(
      await db.query('SELECT ledger_id, job_key FROM notifications WHERE ledger_id = $1', [
        ledgerId,
      ]),
    ).toEqual([{ ledger_id: ledgerId, job_key: staged.job_key }]);
    expect(await jobRows()).toEqual([]);
    // The pool works on after losing a connection.
    expect(await drain(a)).toEqual({ delivered: 0, failed: 0, dead: 0 });
  });

  it('redelivers with the same key, counted, a job whose drainer died after claiming it', async () => {
    const id = await insertJob('test.record', 'orphaned');
    // What a claim leaves when its process dies before any outcome: one attempt, leased.
    await db.query(
      `UPDATE ${JOBS} SET attempts = 1, run_after = now() + interval '1 hour' WHERE id = $1`,
      [id],
    );
    expect(await drain(a)).toEqual({ delivered: 0, failed: 0, dead: 0 }); // leased: left alone
    expect(seen.delivered).toEqual([]);

    await db.query(`UPDATE ${JOBS} SET run_after = now() - interval '1 second'`); // lease over
    expect(await drain(a)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(seen.delivered).toEqual([{ drainer: 'a', id, key: jobKey('orphaned'), attempt: 2 }]);
    expect(await jobRows()).toEqual([]);
  });

  it('fences a lapsed claim: once the job is claimed again, the first claim neither delivers nor fails it', async () => {
    const id = await insertJob('test.record', 'fenced');
    const jobs: StagedJobStore = (a.app.get(IdempotencyStore).capabilities() as any).jobs;
    const first = await jobs.claim(id, null, 5, 3_600);
    expect(first).toMatchObject({ id, attempt: 1, exhausted: false });
    // Its hold lapses before its delivery locks the job, and another drainer claims it.
    await db.query(`UPDATE ${JOBS} SET run_after = now() - interval '1 second'`);
    const second = await jobs.claim(id, null, 5, 3_600);
    expect(second).toMatchObject({ id, attempt: 2, exhausted: false });

    // The first claim delivers nothing and records nothing: the row is the second claim's.
    expect(await jobs.deliver(first!)).toBeUndefined();
    expect(await jobs.fail(first!, 'the first claimant failed', 0, 5)).toBe('gone');
    expect(await jobRows()).toEqual([
      expect.objectContaining({ id, status: 'pending', attempts: 2, last_error: null }),
    ]);

    // The second claim delivers it.
    const delivery = await jobs.deliver(second!);
    expect(delivery).toBeDefined();
    await delivery!.commit();
    expect(await jobRows()).toEqual([]);
  });

  it('makes dead, without delivering it, a job whose last allowed delivery left no outcome', async () => {
    const id = await insertJob('test.record', 'exhausted');
    await db.query(`UPDATE ${JOBS} SET attempts = 3 WHERE id = $1`, [id]); // maxAttempts: 3
    expect(await drain(deadLetters)).toEqual({ delivered: 0, failed: 1, dead: 1 });
    expect(seen.delivered).toEqual([]);
    const [row] = await jobRows();
    expect(row).toMatchObject({ id, status: 'dead', attempts: 3 });
    expect(row.last_error).toMatch(/no outcome was recorded/);
    const failed = deadLetters.events.filter((e) => e.type === 'job_failed') as any[];
    expect(failed.map((e) => [e.id, e.attempt, e.dead])).toEqual([[id, 3, true]]);
  });

  it('gives two jobs of one name and the same arguments, staged by one step, distinct documented keys', async () => {
    const k = key();
    let recordId = '';
    const returned: string[] = [];
    hooks.afterStage = async (context) => {
      recordId = context.identity.recordId;
      returned.push(
        (await context.manager.query(`SELECT job_key FROM ${JOBS} WHERE origin_key = $1`, [k]))[0]
          .job_key,
      );
      returned.push(await context.stage('notify', { ledgerId: context.state.ledgerId }));
    };
    const created = await request(a.server)
      .post('/transfers')
      .set('Idempotency-Key', k)
      .send({ amount: 630, to: 'twice' });
    expect(created.status).toBe(201);

    // SHA-256 of `<record id> NUL <step> NUL <n-th stage() of the step run> NUL <job name>`.
    const documented = [0, 1].map((n) =>
      createHash('sha256').update(`${recordId}\u0000settled\u0000${n}\u0000notify`).digest('hex'),
    );
    expect(recordId).not.toBe('');
    expect(returned).toEqual(documented);
    expect(
      await db.query(`SELECT name, args, job_key FROM ${JOBS} WHERE origin_key = $1 ORDER BY id`, [
        k,
      ]),
    ).toEqual(
      documented.map((job_key) => ({
        name: 'notify',
        args: { ledgerId: created.body.ledgerId },
        job_key,
      })),
    );

    // The handler deduplicates by key (a unique job_key): both jobs take effect.
    expect(await drain(a)).toEqual({ delivered: 2, failed: 0, dead: 0 });
    expect(
      await db.query('SELECT job_key FROM notifications WHERE ledger_id = $1 ORDER BY id', [
        created.body.ledgerId,
      ]),
    ).toEqual(documented.map((job_key) => ({ job_key })));
  });

  it('stages a job exactly when the step committed: none after a failure after stage(), one after the retry', async () => {
    const k = key();
    let stagedAs: string | undefined;
    hooks.afterStage = async (context) => {
      // What the step's transaction holds before it fails.
      const [row] = await context.manager.query(
        `SELECT job_key FROM ${JOBS} WHERE origin_key = $1`,
        [k],
      );
      stagedAs = row?.job_key;
      throw new Error('settled step failed after stage()');
    };
    const body = { amount: 520, to: 'stage' };
    const failed = await request(a.server).post('/transfers').set('Idempotency-Key', k).send(body);
    expect(failed.status).toBe(500);
    expect(stagedAs).toMatch(/^[0-9a-f]{64}$/);
    expect(await db.query(`SELECT * FROM ${JOBS} WHERE origin_key = $1`, [k])).toEqual([]);
    expect(
      await db.query(
        'SELECT status, recovery_point FROM idempotency_records WHERE idempotency_key = $1',
        [k],
      ),
    ).toEqual([{ status: 'released', recovery_point: 'sent' }]);

    hooks.afterStage = undefined;
    const retried = await request(a.server).post('/transfers').set('Idempotency-Key', k).send(body);
    expect(retried.status).toBe(201);
    // Staged again, with the same key as the rolled-back attempt.
    expect(await db.query(`SELECT name, job_key FROM ${JOBS} WHERE origin_key = $1`, [k])).toEqual([
      { name: 'notify', job_key: stagedAs },
    ]);
    expect(await drain(a)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(
      await db.query('SELECT job_key FROM notifications WHERE ledger_id = $1', [
        retried.body.ledgerId,
      ]),
    ).toEqual([{ job_key: stagedAs }]);
  });
});
