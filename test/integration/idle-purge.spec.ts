/**
 * An idle purge is silent: a run that deleted nothing emits no `purged` event (one per interval
 * with count 0 was noise in every log and metric); a run that deleted records reports them.
 */
import request from 'supertest';
import { IdempotencyPurgeService } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

describe('the purge when there is nothing to purge', () => {
  let db: TestDatabase;
  let t: TestApp;

  // A first app of a worker on the Nest 12 leg loads and transforms Nest's ESM: on a loaded
  // 2-core host that took over the default 30 s once (a clean-clone CI run on 679bdd1).
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp('express', db);
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('emits no purged event when it deleted nothing, and one with the count when it did', async () => {
    const purge = t.app.get(IdempotencyPurgeService);
    expect(await purge.purgeExpired()).toBe(0);
    expect(await purge.purgeExpired()).toBe(0);
    expect(t.events.filter((e) => e.type === 'purged')).toEqual([]);

    const created = await request(t.server)
      .post('/orders')
      .set('Idempotency-Key', 'idle-purge-1')
      .send({ amount: 1 });
    expect(created.status).toBe(201);
    await db.query(
      `UPDATE idempotency_records
          SET expires_at = now() - interval '1 hour', purge_after = now() - interval '1 hour'`,
    );
    expect(await purge.purgeExpired()).toBe(1);
    expect(t.events.filter((e) => e.type === 'purged')).toEqual([
      expect.objectContaining({ type: 'purged', count: 1 }),
    ]);
  });
});
