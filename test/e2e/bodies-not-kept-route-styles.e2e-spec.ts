/**
 * `storeBody: false` (set on the module here) on every route style, Express and Fastify: the
 * first client gets its answer as the route writes it, the record keeps the status and headers
 * without the body, the handler runs once, and a retry gets 409 `idempotency_response_not_stored`
 * with the completed status and the stored `Location`. Styles: `@Redirect()` (static, dynamic,
 * transactional), `@Res()` answering before and after it returns (and its own redirect), a
 * handler inherited from an undecorated base, one from a decorated base, one added by a mixin,
 * a global timeout interceptor that answers 408 first. A stream is not stored anyway: its key is
 * released and a retry runs it again.
 */
import { APP_INTERCEPTOR } from '@nestjs/core';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import {
  INHERITANCE_CONTROLLERS,
  ResponseStylesController,
  SlowController,
  TimeoutInterceptor,
  postWithKey,
  recordOf,
} from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

describe.each(ADAPTERS)('storeBody: false on every route style (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `not-kept-${adapter}-${++n}-${Date.now()}`;
  const gates: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      module: { responses: { storeBody: false } },
      controllers: [ResponseStylesController, SlowController, ...INHERITANCE_CONTROLLERS],
      providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
    });
  });

  afterEach(() => {
    for (const gate of gates.splice(0)) t.probe.open(gate);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const bodyOf = async (key: string) =>
    (
      await db.query<{ response_body: Buffer; response_headers: Record<string, string> }>(
        'SELECT response_body, response_headers FROM idempotency_records WHERE idempotency_key = $1',
        [key],
      )
    )[0];

  /** The retry's answer: 409 not stored, with the completed status and, when given, Location. */
  const expectNotStored = async (path: string, key: string, body: object, status: number) => {
    const retry = await postWithKey(t.server, path, key, body);
    expect(retry.status).toBe(409);
    const problem = JSON.parse(retry.body.toString('utf8'));
    expect(problem).toMatchObject({
      code: 'idempotency_response_not_stored',
      completedStatus: status,
    });
    return retry;
  };

  it.each([
    ['/styles/redirect', 'redirect', 303],
    ['/styles/redirect-tx', 'redirect-tx', 303],
    ['/styles/redirect-dynamic', 'redirect-dynamic', 303],
    ['/styles/redirect-dynamic-tx', 'redirect-dynamic-tx', 303],
    ['/styles/res-sync', 'res-sync', 201],
    ['/styles/res-sync-tx', 'res-sync-tx', 201],
    ['/styles/res-late', 'res-late', 201],
    ['/styles/res-late-tx', 'res-late-tx', 201],
    ['/styles/res-redirect', 'res-redirect', 303],
    ['/inherited', 'inherited', 201],
    ['/inherited-tx', 'inherited-tx', 201],
    ['/subclassed', 'subclassed', 201],
    ['/subclassed-tx', 'subclassed-tx', 201],
    ['/mixed', 'mixed', 201],
    ['/mixed-tx', 'mixed-tx', 201],
  ])(
    '%s: answered once, kept without its body, then 409 not stored',
    async (path, route, status) => {
      const key = newKey();
      const body = { amount: 3, note: key };
      const first = await postWithKey(t.server, path, key, body);
      expect(first.status).toBe(status);

      const row = await bodyOf(key);
      expect(row.response_body).toEqual(Buffer.alloc(0));
      expect(row.response_headers['x-nest-idempotency-body-omitted']).toBe('not_kept');

      const retry = await expectNotStored(path, key, body, status);
      if (first.headers.location !== undefined) {
        expect(retry.headers.location).toBe(first.headers.location);
      }
      expect(t.probe.ran(`${route}:${key}`)).toBe(1);
    },
  );

  it('a global timeout answers 408 first; the handler settles; a retry gets 409 not stored', async () => {
    const key = newKey();
    const body = { amount: 3, note: key, gate: key };
    gates.push(key);
    expect((await postWithKey(t.server, '/slow', key, body)).status).toBe(408);
    t.probe.open(key);
    await waitFor(async () => (await recordOf(db, key))?.status === 'completed', 3000);
    expect((await bodyOf(key)).response_body).toEqual(Buffer.alloc(0));
    await expectNotStored('/slow', key, body, 201);
    expect(t.probe.ran(`slow:${key}`)).toBe(1);
  });

  it('a stream is not stored anyway: the key is released and a retry runs it again', async () => {
    const key = newKey();
    const body = { amount: 3, note: key };
    expect((await postWithKey(t.server, '/styles/stream', key, body)).status).toBe(201);
    await waitFor(async () => (await recordOf(db, key))?.status === 'released', 3000);
    expect((await postWithKey(t.server, '/styles/stream', key, body)).status).toBe(201);
    expect(t.probe.ran(`stream:${key}`)).toBe(2);
  });
});
