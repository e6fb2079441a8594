/**
 * The purge deletes abandoned operations once `purge.abandonedRetentionSeconds` passed since they
 * were abandoned, and nothing else on that rule: a released, unfinished operation untouched for
 * longer than the retention (but younger than `phases.maxAgeSeconds` and within its TTL) is kept,
 * and its retry resumes where it stopped instead of starting from scratch. Time is moved by SQL.
 */
import request from 'supertest';
import { IdempotencyPurgeService } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import type { TransferInput } from '../fixtures/phased-transfers';
import { createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

const RECORDS = 'idempotency_records';
const RETENTION_SECONDS = 3_600;
const MAX_AGE_SECONDS = 43_200;
/** Longer ago than the retention, well within the maximum age and the TTL. */
const UNTOUCHED_FOR = `${RETENTION_SECONDS * 2} seconds`;

describe('purge of abandoned operations', () => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  let purge: IdempotencyPurgeService;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp('express', db, {
      ...TRANSFERS,
      module: { purge: { enabled: false, abandonedRetentionSeconds: RETENTION_SECONDS } },
      phases: { completer: { enabled: false }, jobs: false, maxAgeSeconds: MAX_AGE_SECONDS },
    });
    hooks = t.app.get(TransferHooks);
    purge = t.app.get(IdempotencyPurgeService);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const transfer = (key: string, body: TransferInput) =>
    request(t.server).post('/transfers').set('Idempotency-Key', key).send(body);

  const record = async (key: string) =>
    (
      await db.query(`SELECT status, recovery_point FROM ${RECORDS} WHERE idempotency_key = $1`, [
        key,
      ])
    )[0];

  /** A transfer whose provider call failed after `reserved` committed: released, unfinished. */
  const releasedAtReserved = async (key: string, body: TransferInput) => {
    hooks.providerAnswers.push('throw');
    expect((await transfer(key, body)).status).toBe(500);
    expect(await record(key)).toEqual({ status: 'released', recovery_point: 'reserved' });
  };

  /** Every clock of the record moved back: created, last run and last change. */
  const untouchedFor = (key: string, interval: string) =>
    db.query(
      `UPDATE ${RECORDS} SET created_at = now() - $2::interval, last_run_at = now() - $2::interval,
              updated_at = now() - $2::interval
        WHERE idempotency_key = $1`,
      [key, interval],
    );

  it('keeps a released unfinished operation past the retention (its retry resumes), deletes an abandoned one', async () => {
    const released = 'retention-released';
    const abandoned = 'retention-abandoned';
    const body = { amount: 41, to: 'acct_41' };
    await releasedAtReserved(released, body);
    await releasedAtReserved(abandoned, { amount: 42, to: 'acct_42' });
    await db.query(
      `UPDATE ${RECORDS} SET status = 'abandoned', owner_token = NULL, locked_until = NULL
        WHERE idempotency_key = $1`,
      [abandoned],
    );
    await untouchedFor(released, UNTOUCHED_FOR);
    await untouchedFor(abandoned, UNTOUCHED_FOR);

    expect(await purge.purgeExpired()).toBe(1);
    expect(await record(abandoned)).toBeUndefined();
    expect(await record(released)).toEqual({ status: 'released', recovery_point: 'reserved' });

    // The retry resumes after `reserved`: that step does not run again, one ledger row.
    expect(hooks.ran(released, 'reserved')).toBe(1);
    const retry = await transfer(released, body);
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ amount: body.amount });
    expect(hooks.ran(released, 'reserved')).toBe(1);
    expect(await db.query('SELECT amount FROM ledger WHERE amount = $1', [body.amount])).toEqual([
      { amount: body.amount },
    ]);
    expect(await record(released)).toEqual({ status: 'completed', recovery_point: 'finished' });
  });
});
