/**
 * A response that leaves early must not free a key whose handler still runs (docs/design/contract.md#what-is-stored: the key is
 * held until the handler's own work has settled; what is stored is decided then).
 *
 * The NestJS docs' TimeoutInterceptor, registered globally, answers 408 after TIMEOUT_MS while an
 * @Idempotent() handler waits on a gate. Its client's retry must not run the handler a second
 * time; once the handler settles, a retry gets what the handler produced.
 */
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Client } from 'pg';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { orderCount } from '../fixtures/record-queries';
import {
  SlowController,
  TIMEOUT_MS,
  TimeoutInterceptor,
  postWithKey,
  recordOf,
} from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

describe.each(ADAPTERS)('a global TimeoutInterceptor over a slow handler (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `timeout-${adapter}-${++n}-${Date.now()}`;
  const gates: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [SlowController],
      providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
    });
  });

  afterEach(() => {
    // A failed expectation must not leave a handler (and its transaction) waiting for good.
    for (const gate of gates.splice(0)) t.probe.open(gate);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it.each([
    ['/slow', 'slow', 'plain'],
    ['/slow/tx', 'slow-tx', 'transactional'],
  ])(
    '%s (%s): 408 to the first client, 409 while the handler runs, then the replay of its 201',
    async (path, route, kind) => {
      const key = newKey();
      const body = { amount: 7, note: key, gate: key };
      gates.push(key);
      const counter = `${route}:${key}`;

      const first = await postWithKey(t.server, path, key, body);
      expect(first.status).toBe(408);
      // The handler is still waiting on its gate: it ran once and has not settled.
      expect(t.probe.ran(counter)).toBe(1);

      // A retry while the handler runs finds the key held, as for any request in flight.
      const during = await postWithKey(t.server, path, key, body);
      expect({ status: during.status, handlerRuns: t.probe.ran(counter) }).toEqual({
        status: 409,
        handlerRuns: 1,
      });
      expect(JSON.parse(during.body.toString('utf8')).code).toBe('idempotency_key_in_use');

      // The handler settles well after its client got the 408: its outcome is stored then.
      t.probe.open(key);
      await waitFor(async () => (await recordOf(db, key))?.status === 'completed', 3000);

      const [order] = await db.query<{ id: number }>('SELECT id FROM orders WHERE note = $1', [
        key,
      ]);
      const replay = await postWithKey(t.server, path, key, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['content-type']).toMatch(/^application\/json/);
      // Exactly the JSON the handler returned, byte for byte.
      expect(replay.body.toString('utf8')).toBe(
        JSON.stringify({
          id: order.id,
          amount: 7,
          note: key,
          inTransaction: kind === 'transactional',
        }),
      );
      expect(t.probe.ran(counter)).toBe(1);
      // Transactional: the row the handler wrote is committed with the record, once.
      expect(await orderCount(db, key)).toBe(1);
    },
  );

  it('gives the key back when the timeout answered before the claim did: the retry runs the handler', async () => {
    // Another session's uncommitted insert of the key makes the claim wait past the timeout.
    const key = newKey();
    const blocker = new Client({ connectionString: db.url });
    await blocker.connect();
    let first: Awaited<ReturnType<typeof postWithKey>>;
    try {
      await blocker.query('BEGIN');
      await blocker.query(
        `INSERT INTO idempotency_records (scope, idempotency_key, record_id, fingerprint, status,
           expires_at, purge_after, method, path)
         VALUES ('', $1, gen_random_uuid(), repeat('0', 64), 'released', now(), now(), 'POST', '/slow')`,
        [key],
      );
      first = await postWithKey(t.server, '/slow', key, { amount: 3, note: key });
      // The claim is still waiting on the row when the client gets its 408...
      expect(first.status).toBe(408);
    } finally {
      // ...and wins the key once the other session rolls back, after nobody listens any more.
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    // The row is also absent before the claim commits, so wait for the library to give it back.
    await waitFor(
      async () =>
        t.events.some(
          (event) =>
            event.type === 'released' &&
            event.key === key &&
            event.reason === 'rejected_before_handler',
        ),
      3000,
    );
    expect(await recordOf(db, key)).toBeUndefined();
    expect(t.probe.ran(`slow:${key}`)).toBe(0);

    const retry = await postWithKey(t.server, '/slow', key, { amount: 3, note: key });
    expect(retry.status).toBe(201);
    expect(t.probe.ran(`slow:${key}`)).toBe(1);
    expect(await orderCount(db, key)).toBe(1);
  });

  it('still answers 408 to a request whose handler outlives the timeout', async () => {
    // The control case: the library does not swallow or delay the outer interceptor's answer.
    const key = newKey();
    gates.push(key);
    const started = Date.now();
    const first = await postWithKey(t.server, '/slow', key, { amount: 1, note: key, gate: key });
    expect(first.status).toBe(408);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 1500);
  });
});
