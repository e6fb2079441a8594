/**
 * Every way a route can answer must be captured, stored and replayed, and a replay must write its
 * answer itself, whatever the route's style (docs/design/contract.md#the-decision-table, docs/design/contract.md#what-is-stored): `@Redirect()` (static and dynamic),
 * `@Res()` without passthrough (answering after the handler returns, before it returns, through
 * Node's raw `end`, or with `res.redirect`). A stream is the documented exception: not stored,
 * the key released. And no path of the library may leave a rejection unhandled: a replay whose
 * stored headers cannot be written still gets an answer.
 */
import { validateHeaderValue } from 'node:http';
import { runInThisContext } from 'node:vm';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { orderCount } from '../fixtures/record-queries';
import {
  ResponseStylesController,
  expectReusedKeyRefused,
  postWithKey,
  recordOf,
} from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

/** Location the route answers with: fixed, or the orders row the handler wrote. */
type ExpectedLocation = 'none' | '/orders/1' | 'the order';

const REDIRECT_ROUTES: [string, number, ExpectedLocation][] = [
  ['redirect', 303, '/orders/1'],
  ['redirect-tx', 303, '/orders/1'],
  ['redirect-dynamic', 303, 'the order'],
  ['redirect-dynamic-tx', 303, 'the order'],
];

const RES_ROUTES: [string, number, ExpectedLocation][] = [
  ['res-late', 201, 'none'],
  ['res-late-tx', 201, 'none'],
  ['res-sync', 201, 'none'],
  ['res-sync-tx', 201, 'none'],
  ['res-redirect', 303, 'the order'],
  ['res-redirect-tx', 303, 'the order'],
];

describe.each(ADAPTERS)('route styles: how a response is sent (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `styles-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: [ResponseStylesController] });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  /**
   * The first request gets the route's own answer; the retry with the same key gets it again,
   * byte for byte, marked as a replay, without running the handler; the handler's row exists
   * once (committed, on a -tx route); the record is completed with that status.
   */
  async function expectStoredAndReplayed(
    server: any,
    name: string,
    status: number,
    location: ExpectedLocation,
  ): Promise<void> {
    const key = newKey();
    const body = { amount: 2, note: key };
    const path = `/styles/${name}`;

    const first = await postWithKey(server, path, key, body);
    expect(first.status).toBe(status);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    if (location === 'none') expect(first.headers.location).toBeUndefined();
    else if (location === 'the order') expect(first.headers.location).toMatch(/^\/orders\/\d+$/);
    else expect(first.headers.location).toBe(location);

    const retry = await postWithKey(server, path, key, body);
    expect({
      status: retry.status,
      replayed: retry.headers['idempotent-replayed'],
      handlerRuns: t.probe.ran(`${name}:${key}`),
    }).toEqual({ status, replayed: 'true', handlerRuns: 1 });
    expect(retry.headers.location).toBe(first.headers.location);
    expect(retry.headers['content-type']).toBe(first.headers['content-type']);
    expect(retry.body.toString('latin1')).toBe(first.body.toString('latin1'));
    expect(await recordOf(db, key)).toEqual({ status: 'completed', response_status: status });
    // The handler's row exists once: on a -tx route, committed with the record.
    expect(await orderCount(db, key)).toBe(1);
    if (location === 'the order') {
      const [order] = await db.query<{ id: number }>('SELECT id FROM orders WHERE note = $1', [
        key,
      ]);
      expect(first.headers.location).toBe(`/orders/${order.id}`);
    }
  }

  it('a plain JSON route is stored and replayed (control)', async () => {
    await expectStoredAndReplayed(t.server, 'json', 201, 'none');
  });

  describe('@Redirect()', () => {
    it.each(REDIRECT_ROUTES)(
      '/styles/%s: the %d redirect is stored and replayed with its Location',
      async (name, status, location) => {
        await expectStoredAndReplayed(t.server, name, status, location);
      },
    );
  });

  describe('@Res() without passthrough', () => {
    it.each(RES_ROUTES)(
      '/styles/%s: the %d the handler sent is stored, and the replay is written by the library',
      async (name, status, location) => {
        await expectStoredAndReplayed(t.server, name, status, location);
      },
    );

    // Express only: on Fastify a @Res() handler gets the reply, whose writes all go through
    // reply.send (covered above); a raw reply.raw.end() is in the Fastify adapter's unit spec.
    (adapter === 'express' ? it : it.skip)(
      "/styles/res-end: Node's raw res.end() on Express is stored and replayed",
      async () => {
        await expectStoredAndReplayed(t.server, 'res-end', 201, 'none');
      },
    );
  });

  describe('a key reused with another request', () => {
    it.each([
      ['json'],
      ...REDIRECT_ROUTES.map(([name]) => [name]),
      ...RES_ROUTES.map(([name]) => [name]),
    ])('/styles/%s: refused with 422 problem+json, the handler not run again', async (name) => {
      const key = newKey();
      const path = `/styles/${name}`;
      await postWithKey(t.server, path, key, { amount: 2, note: key });
      await expectReusedKeyRefused(t.server, t.probe, path, name, key);
    });
  });

  describe('a StreamableFile (documented: streams are not stored)', () => {
    it('streams its bytes, releases the key once sent, and a retry runs the handler again', async () => {
      const key = newKey();
      const body = { amount: 1, note: key };

      const first = await postWithKey(t.server, '/styles/stream', key, body);
      expect(first.status).toBe(201);
      expect(first.body.toString('utf8')).toBe('stream-chunk-1;stream-chunk-2');
      await waitFor(async () => (await recordOf(db, key))?.status !== 'in_flight', 3000);
      expect([undefined, 'released']).toContain((await recordOf(db, key))?.status);

      const retry = await postWithKey(t.server, '/styles/stream', key, body);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(retry.body.toString('utf8')).toBe('stream-chunk-1;stream-chunk-2');
      expect(t.probe.ran(`stream:${key}`)).toBe(2);
    });
  });

  describe('a replay whose stored headers cannot be written', () => {
    let noCache: TestApp;

    beforeAll(async () => {
      // No replay cache: the replay reads the (corrupted) record from the database.
      noCache = await createTestApp(adapter, db, {
        controllers: [ResponseStylesController],
        module: { replayCache: false },
      });
    });

    afterAll(async () => {
      await noCache?.close();
    });

    it('answers the client with a 5xx and leaves no rejection unhandled', async () => {
      // The corrupted value is one Node's setHeader refuses.
      let refusal: any;
      try {
        validateHeaderValue('location', 'bad\nvalue');
      } catch (error) {
        refusal = error;
      }
      expect(refusal?.code).toBe('ERR_INVALID_CHAR');

      const key = newKey();
      const body = { amount: 9, note: key };
      const first = await postWithKey(noCache.server, '/styles/json', key, body);
      expect(first.status).toBe(201);
      await db.query(
        'UPDATE idempotency_records SET response_headers = response_headers || $2::jsonb ' +
          'WHERE idempotency_key = $1',
        [key, JSON.stringify({ location: 'bad\nvalue' })],
      );

      // Jest gives each test file a copy of `process` whose events never fire: listen on the
      // real one, where Node reports unhandled rejections (and, with no listener, dies of them).
      const realProcess: NodeJS.Process = runInThisContext('process');
      const unhandled: unknown[] = [];
      const listener = (reason: unknown) => unhandled.push(reason);
      realProcess.on('unhandledRejection', listener);
      try {
        const outcome: any = await postWithKey(noCache.server, '/styles/json', key, body).then(
          (response) => response,
          (error: Error) => error,
        );
        // Let a rejection made while answering reach the process before looking.
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(unhandled).toEqual([]);
        const answer = typeof outcome.status === 'number' ? outcome.status : String(outcome);
        expect(typeof answer === 'number' && answer >= 500 && answer < 600 ? '5xx' : answer).toBe(
          '5xx',
        );
      } finally {
        realProcess.off('unhandledRejection', listener);
      }
      // A completed record is never run again, even when its replay cannot be written.
      expect(noCache.probe.ran(`json:${key}`)).toBe(1);
      expect(await orderCount(db, key)).toBe(1);

      // The process and the app are alive and serve the next request.
      const next = newKey();
      const after = await postWithKey(noCache.server, '/styles/json', next, {
        amount: 1,
        note: next,
      });
      expect(after.status).toBe(201);
    });
  });
});
