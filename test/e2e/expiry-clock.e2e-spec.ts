/**
 * A transactional handler's replay window starts when its response is stored, not when its
 * transaction began. With a 2 s TTL and a handler held 1.5 s, the record must expire at least 2 s
 * after the handler was let go (measured from BEGIN it would expire at most 0.5 s after), and a
 * retry after that earlier instant must still replay. Every instant is read from PostgreSQL's
 * clock, so a slow host only widens the margins the assertions rely on.
 */
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { databaseClock, recordInstant, sleepPast } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const TTL_SECONDS = 2;
const HOLD_SECONDS = 1.5;

describe.each(ADAPTERS)('expiry of a slow transactional request (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    // No replay cache: the replay below must come from the record itself.
    t = await createTestApp(adapter, db, {
      module: { responses: { ttlSeconds: TTL_SECONDS }, replayCache: false },
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
    // The transaction began before the handler ran, so at least HOLD_SECONDS before `opened`.
    await waitFor(async () => t.probe.ran('tx') === before + 1);
    await new Promise((resolve) => setTimeout(resolve, HOLD_SECONDS * 1000));
    const opened = await databaseClock(db);
    t.probe.open(`${key}#1`);
    expect((await answered).status).toBe(201);

    expect((await recordInstant(db, key, 'expires_at')) - opened).toBeGreaterThanOrEqual(
      TTL_SECONDS,
    );

    // Past the latest instant at which a record measured from BEGIN would have expired.
    await sleepPast(db, opened - HOLD_SECONDS + TTL_SECONDS);
    const replay = await request(t.server)
      .post('/orders/tx')
      .set('Idempotency-Key', key)
      .send(body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(t.probe.ran('tx') - before).toBe(1);
  });
});
