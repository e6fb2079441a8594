/**
 * The replay cache (`replayCache`): completed records this instance stored or replayed are
 * answered from memory. Observable from outside: such replays keep working while the database
 * is unreachable, while anything the cache cannot answer still fails closed with 503.
 */
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { DatabaseOutage } from '../fixtures/database-outage';
import { recordInstant, sleepPast } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

describe.each(ADAPTERS)('replay cache (%s)', (adapter) => {
  let db: TestDatabase;
  let outage: DatabaseOutage;
  let cached: TestApp;
  let uncached: TestApp;
  let n = 0;
  const newKey = () => `cache-${adapter}-${++n}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    outage = await DatabaseOutage.of(db);
    cached = await createTestApp(adapter, db);
    uncached = await createTestApp(adapter, db, { module: { replayCache: false } });
  });

  afterAll(async () => {
    await outage?.end().catch(() => undefined);
    await cached?.close();
    await uncached?.close();
    await db?.drop();
  });

  const post = (t: TestApp, key: string, body: object, user = 'alice') =>
    request(t.server).post('/orders').set('Idempotency-Key', key).set('x-user', user).send(body);

  /** Runs `during` with the database unreachable, then lets the pools reconnect. */
  const whileDown = async (during: () => Promise<void>) => {
    await outage.begin();
    try {
      await during();
    } finally {
      await outage.end();
    }
  };

  it('replays what this instance stored without the database; anything else fails closed', async () => {
    const key = newKey();
    const first = await post(cached, key, { amount: 7 }).expect(201);
    await whileDown(async () => {
      const replay = await post(cached, key, { amount: 7 });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['location']).toBe(first.headers['location']);
      expect(replay.text).toBe(first.text);

      // Another body under the key: 422, as the store would answer.
      const reused = await post(cached, key, { amount: 8 });
      expect(reused.status).toBe(422);
      expect(reused.body.code).toBe('idempotency_key_reused');

      // Another caller's key of the same name is not in the cache: it needs the store.
      const bob = await post(cached, key, { amount: 7 }, 'bob');
      expect(bob.status).toBe(503);
      expect(bob.body.code).toBe('idempotency_store_unavailable');
      const fresh = await post(cached, newKey(), { amount: 7 });
      expect(fresh.status).toBe(503);
    });
    expect(cached.probe.ran('create')).toBe(1);
  });

  it('caches a replay read from the store (completed by another instance)', async () => {
    const key = newKey();
    const first = await post(uncached, key, { amount: 9 }).expect(201);
    await post(cached, key, { amount: 9 }).expect(201);
    await whileDown(async () => {
      const replay = await post(cached, key, { amount: 9 });
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
    });
  });

  it('with replayCache: false, every replay reads the store (503 while it is down)', async () => {
    const key = newKey();
    await post(uncached, key, { amount: 3 }).expect(201);
    await whileDown(async () => {
      const replay = await post(uncached, key, { amount: 3 });
      expect(replay.status).toBe(503);
      expect(replay.body.code).toBe('idempotency_store_unavailable');
    });
  });

  it('stops serving a record when it expires: the key then runs anew', async () => {
    // The replay must come within the TTL of the first answer: 1.5 s leaves a loaded host time
    // for it (0.3 s did not always).
    const short = await createTestApp(adapter, db, { module: { responses: { ttlSeconds: 1.5 } } });
    try {
      const key = newKey();
      const before = short.probe.ran('create');
      const first = await post(short, key, { amount: 5 }).expect(201);
      const replay = await post(short, key, { amount: 5 }).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      // Until the record has expired by PostgreSQL's clock (the cache's entry expires no later).
      await sleepPast(db, await recordInstant(db, key, 'expires_at'));
      const again = await post(short, key, { amount: 5 }).expect(201);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(again.body.id).not.toBe(first.body.id);
      expect(short.probe.ran('create') - before).toBe(2);
    } finally {
      await short.close();
    }
  });
});
