/**
 * Operations in phases (docs/design/contract.md#operations-in-phases) through HTTP, on both adapters: the three-step transfer runs
 * once per key, stores its final response with the move to `finished`, resumes from its
 * recovery point after a retry-later or a failure, and its staged job is delivered.
 */
import request from 'supertest';
import { IdempotencyJobs } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks, conflictOnce } from '../fixtures/phased-transfers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

describe.each(ADAPTERS)('operations in phases on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  let n = 0;
  const key = () => `phases-${adapter}-${++n}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      ...TRANSFERS,
      phases: { completer: false, jobs: false },
    });
    hooks = t.app.get(TransferHooks);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  beforeEach(() => {
    hooks.before.clear();
    hooks.providerAnswers.length = 0;
    hooks.afterSend = undefined;
  });

  const record = async (k: string) =>
    (
      await db.query(
        'SELECT status, recovery_point, operation, operation_state FROM idempotency_records WHERE idempotency_key = $1',
        [k],
      )
    )[0];

  it('runs the three steps once, stores the final response and replays it byte for byte', async () => {
    const k = key();
    const first = await request(t.server)
      .post('/transfers')
      .set('Idempotency-Key', k)
      .send({ amount: 500, to: 'bob' });
    expect(first.status).toBe(201);
    expect(first.headers.location).toBe(`/transfers/${first.body.ledgerId}`);
    expect(first.headers['x-not-replayed']).toBe('yes');
    expect(await record(k)).toMatchObject({
      status: 'completed',
      recovery_point: 'finished',
      operation: 'transfers.create',
    });
    const replay = await request(t.server)
      .post('/transfers')
      .set('Idempotency-Key', k)
      .send({ amount: 500, to: 'bob' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers.location).toBe(first.headers.location);
    expect(replay.text).toBe(first.text);
    const ledger = await db.query('SELECT status FROM ledger WHERE id = $1', [first.body.ledgerId]);
    expect(ledger).toEqual([{ status: 'settled' }]);
    const jobs = await db.query('SELECT name, origin_key FROM idempotency_records_jobs');
    expect(jobs).toContainEqual({ name: 'notify', origin_key: k });
    const summary = await t.app.get(IdempotencyJobs).drain();
    expect(summary.delivered).toBeGreaterThanOrEqual(1);
    expect(
      await db.query('SELECT ledger_id FROM notifications WHERE ledger_id = $1', [
        first.body.ledgerId,
      ]),
    ).toHaveLength(1);
  });

  it('resumes at the recovery point after a retry-later: completed steps are not run again', async () => {
    const k = key();
    hooks.providerAnswers.push('unavailable');
    const reservedBefore = hooks.stepRuns.get('reserved') ?? 0;
    const first = await request(t.server)
      .post('/transfers')
      .set('Idempotency-Key', k)
      .send({ amount: 700, to: 'carol' });
    expect(first.status).toBe(503);
    expect(first.headers['retry-after']).toBe('1');
    expect(first.body.code).toBe('idempotency_retry_later');
    expect(await record(k)).toMatchObject({ status: 'released', recovery_point: 'reserved' });
    const retry = await request(t.server)
      .post('/transfers')
      .set('Idempotency-Key', k)
      .send({ amount: 700, to: 'carol' });
    expect(retry.status).toBe(201);
    expect(hooks.stepRuns.get('reserved')).toBe(reservedBefore + 1);
    expect(await db.query('SELECT count(*)::int AS n FROM ledger WHERE amount = 700')).toEqual([
      { n: 1 },
    ]);
  });

  it('runs a SERIALIZABLE local step again, alone, after a serialization failure (40001)', async () => {
    const k = key();
    const { contended, starts } = await conflictOnce(hooks, db);
    const runsBefore = hooks.stepRuns.get('reserved') ?? 0;
    const res = await request(t.server)
      .post('/transfers/serializable')
      .set('Idempotency-Key', k)
      .send({ amount: 901, to: 'dave' });
    expect(res.status).toBe(201);
    expect(starts()).toBe(2);
    expect(hooks.stepRuns.get('reserved')).toBe(runsBefore + 2);
    // The failed attempt's insert was rolled back: one ledger row for the transfer.
    expect(await db.query('SELECT status FROM ledger WHERE amount = 901')).toEqual([
      { status: 'settled' },
    ]);
    expect(await db.query('SELECT amount FROM ledger WHERE id = $1', [contended])).toEqual([
      { amount: 1 },
    ]);
  });

  it('refuses at bootstrap a foreign step whose timeout and margin do not fit in the lease', async () => {
    // "sent" has timeoutSeconds 0.3; the default margin is 2 s: 2.3 s of lease needed.
    await expect(
      createTestApp(adapter, db, {
        ...TRANSFERS,
        module: { execution: { lockTimeoutSeconds: 1 } },
        phases: { completer: false, jobs: false },
      }),
    ).rejects.toThrow(
      'foreign step "sent" needs 2.3 s of lease (timeoutSeconds 0.3 + foreignStepMarginSeconds 2), more than execution.lockTimeoutSeconds (1)',
    );
  });

  it('runs a foreign step whose timeout and margin equal the lease exactly', async () => {
    // A renewal leaves a few ms less than a whole lease; that must not refuse the step.
    const exact = await createTestApp(adapter, db, {
      ...TRANSFERS,
      module: { execution: { lockTimeoutSeconds: 2.3 } },
      phases: { completer: false, jobs: false },
    });
    try {
      const k = key();
      const res = await request(exact.server)
        .post('/transfers')
        .set('Idempotency-Key', k)
        .send({ amount: 902, to: 'erin' });
      expect(res.status).toBe(201);
      expect(await record(k)).toMatchObject({ status: 'completed', recovery_point: 'finished' });
      expect(exact.app.get(TransferHooks).providerCalls).toHaveLength(1);
    } finally {
      await exact.close();
    }
  });
});
