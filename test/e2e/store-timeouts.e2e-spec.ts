/**
 * A database that stops answering (docs/design/contract.md#the-decision-table, "store unreachable for the claim"): with TypeORM
 * connected through a TCP proxy that freezes, a POST with a new key fails closed within
 * `storeTimeoutSeconds` — 503 problem+json `idempotency_store_unavailable` with `Retry-After`,
 * the handler never runs — instead of hanging; once the database answers again, the same key
 * runs once. On Express and Fastify.
 */
import request from 'supertest';
import type { IdempotencyEvent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { FrozenProxy } from '../fixtures/frozen-proxy';
import type { Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';
import type { TestApp } from '../fixtures/test-app';
import { typeOrmStore } from '../../lib/storage/typeorm';

const STORE_TIMEOUT_SECONDS = 0.3;
const PROBLEM = /^application\/problem\+json/;

describe.each(ADAPTERS)('store timeouts on %s', (adapter) => {
  let db: TestDatabase;
  let proxy: FrozenProxy;
  let app: TestApp;
  let probe: Probe;
  let events: IdempotencyEvent[];
  let seq = 0;
  const newKey = () => `frozen-${adapter}-${++seq}-${Date.now()}`;
  const post = (key: string) =>
    request(app.server).post('/orders').set('Idempotency-Key', key).send({ amount: 7 });

  beforeAll(async () => {
    db = await createTestDatabase();
    proxy = await FrozenProxy.start();
    app = await createTestApp(adapter, db, {
      module: { store: typeOrmStore({ timeoutSeconds: STORE_TIMEOUT_SECONDS }) },
      databaseUrl: proxy.urlFor(db.url),
    });
    probe = app.probe;
    events = app.events;
  });

  afterAll(async () => {
    // First the proxy: it ends the connections frozen for good, which the pool's shutdown
    // would otherwise wait for.
    await proxy?.close();
    await app?.close();
    await db?.drop();
  });

  it('a frozen database: 503 idempotency_store_unavailable with Retry-After within 2 s, handler not run; after thawing the same key runs once', async () => {
    // A first request leaves an idle pooled connection, which the frozen claim then gets. On a
    // loaded machine the very first claim (a new connection through the proxy, its statements
    // prepared) can outlast the 300 ms given to every store call: then it is tried again with
    // another key, and what it logged is not part of what is checked below.
    await waitFor(async () => (await post(newKey())).status === 201);
    const fromEvent = events.length;
    const key = newKey();
    const before = probe.ran('create');

    proxy.freeze();
    let refused: request.Response;
    const started = Date.now();
    try {
      refused = await post(key);
    } finally {
      proxy.thaw();
    }
    const elapsed = Date.now() - started;

    expect(refused.status).toBe(503);
    expect(refused.headers['content-type']).toMatch(PROBLEM);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).toMatchObject({ status: 503, code: 'idempotency_store_unavailable' });
    // Answered because the claim ran out of time, not because anything failed faster.
    expect(elapsed).toBeGreaterThanOrEqual(STORE_TIMEOUT_SECONDS * 1000 - 20);
    expect(elapsed).toBeLessThan(2000);
    expect(probe.ran('create')).toBe(before);
    const storeErrors = events.slice(fromEvent).filter((event) => event.type === 'store_error');
    expect(storeErrors).toEqual([
      expect.objectContaining({
        operation: 'claim',
        error: expect.objectContaining({
          message: expect.stringMatching(/^nest-idempotency: claim timed out after 300 ms/),
        }),
      }),
    ]);

    const accepted = await post(key).expect(201);
    expect(probe.ran('create')).toBe(before + 1);
    const replay = await post(key).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(accepted.text);
    expect(
      await db.query('SELECT status FROM idempotency_records WHERE idempotency_key = $1', [key]),
    ).toEqual([{ status: 'completed' }]);
  });
});
