/**
 * A transactional handler's replay window starts when its response is stored, not when its
 * transaction began: with a 1 s TTL and a handler that runs 0.7 s, the record must still be
 * replayable for about a second after the 201 (measured from BEGIN it would expire 0.3 s after).
 */
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

describe.each(ADAPTERS)('expiry of a slow transactional request (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    // No replay cache: the replay below must come from the record itself.
    t = await createTestApp(adapter, db, {
      module: { responses: { ttlSeconds: 1 }, replayCache: false },
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('measures the TTL from the completion, so the replay outlives a slow handler', async () => {
    const key = `ttl-${adapter}-${Date.now()}`;
    const body = { amount: 3, note: key, gate: key };
    const before = t.probe.ran('tx');
    const first = request(t.server).post('/orders/tx').set('Idempotency-Key', key).send(body);
    const answered = first.then((r) => r);
    await waitFor(async () => t.probe.ran('tx') === before + 1);
    await new Promise((resolve) => setTimeout(resolve, 700));
    t.probe.open(`${key}#1`);
    expect((await answered).status).toBe(201);

    const [{ left }] = await db.query<{ left: number }>(
      `SELECT EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 AS left
         FROM idempotency_records WHERE idempotency_key = $1`,
      [key],
    );
    expect(left).toBeGreaterThan(0.8);
    await new Promise((resolve) => setTimeout(resolve, 450));
    const replay = await request(t.server)
      .post('/orders/tx')
      .set('Idempotency-Key', key)
      .send(body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(t.probe.ran('tx') - before).toBe(1);
  });
});
