/**
 * Read replicas (docs/running-in-production.md#read-replicas): with TypeORM's
 * `replication: { master, slaves }`, claims, completions and replays all go to the primary. The
 * replica here stops replaying WAL once the schema has reached it, so it never holds a record:
 * a key looked up there would be missing, and its retry would run the handler again (the double
 * charge of hand-made idempotency layers) or take another body for a first request.
 */
import request from 'supertest';
import { DataSource } from 'typeorm';
import { PostgresPair, query } from '../chaos/failover/postgres-pair';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';
import { WaitingController, waitersOf } from '../fixtures/waiting.controller';
import { OrdersController } from '../fixtures/orders.controller';

jest.setTimeout(120_000);

const RECORDS = 'SELECT count(*)::int AS n FROM idempotency_records';

describe.each(ADAPTERS)('read replicas on %s', (adapter: AdapterName) => {
  let pair: PostgresPair;
  let t: TestApp;

  beforeAll(async () => {
    pair = await PostgresPair.create('async');
    const url = pair.url('primary');
    t = await createTestApp(adapter, { url } as TestDatabase, {
      databaseUrl: url,
      replicaUrl: pair.url('replica'),
      controllers: [OrdersController, WaitingController],
    });
    // The replica has the tables, then lags for good: it never sees a record.
    await pair.waitForReplica();
    await query(pair.url('replica'), 'SELECT pg_wal_replay_pause()');
  });

  afterAll(async () => {
    await t?.close().catch(() => undefined);
    await pair?.remove();
  });

  afterEach(async () => {
    // The records are on the primary only, and the app's own replica connections see none.
    const replica = t.app.get(DataSource).createQueryRunner('slave');
    try {
      expect((await replica.query(RECORDS))[0].n).toBe(0);
    } finally {
      await replica.release();
    }
    expect((await query(pair.url('primary'), RECORDS))[0].n).toBeGreaterThan(0);
  });

  const post = (path: string, key: string, body: object, prefer?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return (prefer ? req.set('Prefer', prefer) : req).send(body);
  };

  it.each([
    ['a plain route', '/orders', 'create'],
    ['a transactional route', '/orders/tx', 'tx'],
  ])('on %s, retries replay the first answer and another body gets 422', async (_, path, run) => {
    const key = `replica-${run}-${adapter}`;
    const first = await post(path, key, { amount: 500 });
    expect(first.status).toBe(201);

    for (let retry = 0; retry < 3; retry++) {
      const again = await post(path, key, { amount: 500 });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.text).toBe(first.text);
    }
    const changed = await post(path, key, { amount: 900 });
    expect(changed.status).toBe(422);
    expect(t.probe.ran(run)).toBe(1);
    const orders = await query(pair.url('primary'), 'SELECT amount FROM orders WHERE id = $1', [
      first.body.id,
    ]);
    expect(orders).toEqual([{ amount: 500 }]);
  });

  it('a duplicate with Prefer: wait gets the first answer once it completes', async () => {
    const key = `replica-wait-${adapter}`;
    const first = post('/waiting', key, { gate: 'g' }).then((response) => response);
    await waitFor(async () => t.probe.ran('waits') === 1, 20_000);
    const waiter = post('/waiting', key, { gate: 'g' }, 'wait=10').then((response) => response);
    await waitFor(async () => waitersOf(t.app) === 1, 20_000);
    t.probe.open('g#1');

    const [answered, waited] = await Promise.all([first, waiter]);
    expect(answered.status).toBe(201);
    expect(waited.status).toBe(201);
    expect(waited.headers['idempotent-replayed']).toBe('true');
    expect(waited.text).toBe(answered.text);
    expect(t.probe.ran('waits')).toBe(1);
  });
});
