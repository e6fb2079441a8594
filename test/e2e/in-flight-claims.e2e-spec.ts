/**
 * Duplicates of a key whose handler runs on this instance are answered by the instance itself
 * (one claim per instance in a same-key storm, not one per request), with the answer the store
 * would give. Observable from outside: those answers keep coming while the database is
 * unreachable, and stop once the lease the instance took has run out.
 */
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { DatabaseOutage } from '../fixtures/database-outage';
import { orderCount, recordInstant, sleepPast } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

describe.each(ADAPTERS)('duplicates of a key running here (%s)', (adapter) => {
  let db: TestDatabase;
  let outage: DatabaseOutage;
  let t: TestApp;
  let n = 0;
  const newKey = () => `running-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    outage = await DatabaseOutage.of(db);
    t = await createTestApp(adapter, db);
  });

  afterAll(async () => {
    await outage?.end().catch(() => undefined);
    await t?.close();
    await db?.drop();
  });

  const post = (app: TestApp, key: string, body: object, user = 'alice') =>
    request(app.server).post('/orders').set('Idempotency-Key', key).set('x-user', user).send(body);

  /** Starts a request whose handler waits on the gate `key`, and waits until it runs. */
  const holdKey = async (app: TestApp, key: string, body: object) => {
    const before = app.probe.ran('create');
    const response = post(app, key, body).then((r) => r);
    await waitFor(async () => app.probe.ran('create') === before + 1);
    return { response };
  };

  it('answers 409 and 422 without the database while the handler runs, then replays', async () => {
    const key = newKey();
    const body = { amount: 4, note: key, gate: key };
    const held = await holdKey(t, key, body);
    const started = t.probe.ran('create');
    await outage.begin();
    try {
      const duplicate = await post(t, key, body);
      expect(duplicate.status).toBe(409);
      expect(duplicate.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(duplicate.headers['retry-after']).toBeDefined();
      expect(duplicate.body.code).toBe('idempotency_key_in_use');

      const reused = await post(t, key, { ...body, amount: 5 });
      expect(reused.status).toBe(422);
      expect(reused.body.code).toBe('idempotency_key_reused');

      // Nothing local about another caller's key of the same name, or another key.
      expect((await post(t, key, body, 'bob')).status).toBe(503);
      expect((await post(t, newKey(), body)).status).toBe(503);
    } finally {
      await outage.end();
    }
    t.probe.open(`${key}#1`);
    const first = await held.response;
    expect(first.status).toBe(201);
    const replay = await post(t, key, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(t.probe.ran('create')).toBe(started);
    expect(await orderCount(db, key)).toBe(1);
  });

  it('renews the lease while the handler runs, and asks the store once it could not', async () => {
    // A lease of 1.2 s is renewed every 0.4 s: a loaded host would have to starve the heartbeat
    // for 0.8 s to lose it (with 0.3 s, 0.2 s did).
    const LEASE_SECONDS = 1.2;
    const short = await createTestApp(adapter, db, {
      module: { execution: { lockTimeoutSeconds: LEASE_SECONDS } },
    });
    const other = await createTestApp(adapter, db, {
      module: { execution: { lockTimeoutSeconds: LEASE_SECONDS } },
    });
    const key = newKey();
    try {
      const body = { amount: 4, note: key, gate: key };
      const held = await holdKey(short, key, body);
      const firstLease = await recordInstant(db, key, 'locked_until');
      // Sleep until the database clock is past the first lease, measured by the database.
      expect(await sleepPast(db, firstLease)).toBeGreaterThan(0);
      // Past the first lease: the heartbeat moved it forward, so another instance (asking the
      // database) and this one (asking itself) both still answer 409.
      expect(await recordInstant(db, key, 'locked_until')).toBeGreaterThan(firstLease);
      expect((await post(other, key, body)).status).toBe(409);
      expect((await post(short, key, body)).status).toBe(409);
      await outage.begin();
      try {
        // Renewals now fail: once the lease this instance holds has run out, only the store
        // could say whether the key is still held, and it is unreachable. Its last renewal was
        // sent before the outage began, so its lease ends within LEASE_SECONDS of now.
        await new Promise((resolve) => setTimeout(resolve, LEASE_SECONDS * 1000 + 100));
        expect((await post(short, key, body)).status).toBe(503);
      } finally {
        await outage.end();
      }
      short.probe.open(`${key}#1`);
      expect((await held.response).status).toBe(201);
      expect(short.probe.ran('create') + other.probe.ran('create')).toBe(1);
      expect(await orderCount(db, key)).toBe(1);
    } finally {
      // A failed assertion must not leave a handler waiting (and the apps unable to close).
      for (const app of [short, other]) for (const n of [1, 2]) app.probe.open(`${key}#${n}`);
      await short.close();
      await other.close();
    }
  });

  it('runs a same-key storm once: one execution, every other request 409 or a replay', async () => {
    const key = newKey();
    const body = { amount: 4, note: key };
    const before = t.probe.ran('create');
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => post(t, key, body).then((r) => r)),
    );
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const executed = answers.filter(
      (r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined,
    );
    expect(executed).toHaveLength(1);
    expect(t.probe.ran('create') - before).toBe(1);
    expect(await orderCount(db, key)).toBe(1);
  });

  it('fails every duplicate closed when the claim they waited for could not reach the store', async () => {
    const key = newKey();
    await outage.begin();
    try {
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => post(t, key, { amount: 4, note: key }).then((r) => r)),
      );
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(503));
    } finally {
      await outage.end();
    }
    expect(await orderCount(db, key)).toBe(0);
  });
});
