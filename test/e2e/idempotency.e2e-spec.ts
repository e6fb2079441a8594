/**
 * The decision table of docs/design/contract.md#the-decision-table and the outcome policy of docs/design/contract.md#what-is-stored, row by row, on Express and
 * Fastify against real PostgreSQL: status codes, headers, bytes, handler runs and rows.
 */
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const PROBLEM = /^application\/problem\+json/;

describe.each(ADAPTERS)('idempotent routes on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let seq = 0;
  const newKey = () => `key-${adapter}-${++seq}-${Date.now()}`;
  const post = (path: string, key: string | undefined, body: unknown = { amount: 5 }) => {
    const req = request(t.server).post(path);
    if (key !== undefined) req.set('Idempotency-Key', key);
    return req.send(body as object);
  };
  const record = async (key: string) =>
    (await db.query('SELECT * FROM idempotency_records WHERE idempotency_key = $1', [key]))[0];
  const orders = async () => Number((await db.query('SELECT count(*) AS n FROM orders'))[0].n);

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { module: { execution: { lockTimeoutSeconds: 5 } } });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  describe('the key header (docs/design/contract.md#the-key)', () => {
    it('rejects a missing key with 400 problem+json before validation or the handler', async () => {
      const before = t.probe.ran('create');
      const res = await post('/orders', undefined, { amount: -1 });
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(PROBLEM);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.body).toMatchObject({
        status: 400,
        code: 'idempotency_key_missing',
        title: 'Idempotency-Key is missing',
        type: 'urn:nest-idempotency:problem:idempotency_key_missing',
      });
      expect(typeof res.body.detail).toBe('string');
      expect(t.probe.ran('create')).toBe(before);
    });

    it.each([
      ['empty quoted', '""'],
      ['too long', 'k'.repeat(256)],
      ['bare with comma', 'a,b'],
      ['bad escape', '"a\\nb"'],
      ['unterminated quote', '"abc'],
      ['text after the quote', '"abc"def'],
    ])('rejects an invalid key (%s) with 400 and never echoes it', async (_name, value) => {
      const before = t.probe.ran('create');
      const res = await post('/orders', value);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(PROBLEM);
      expect(res.body.code).toBe('idempotency_key_invalid');
      if (value.length > 2) expect(res.text).not.toContain(value);
      expect(t.probe.ran('create')).toBe(before);
    });

    it('rejects a non-ASCII key and a repeated header line', async () => {
      const nonAscii = await request(t.server)
        .post('/orders')
        .set('Idempotency-Key', Buffer.from('clé', 'latin1').toString('latin1'))
        .send({ amount: 5 });
      expect(nonAscii.status).toBe(400);
      expect(nonAscii.body.code).toBe('idempotency_key_invalid');
      const twice = await request(t.server)
        .post('/orders')
        .set('Idempotency-Key', ['one', 'two'] as unknown as string)
        .send({ amount: 5 });
      expect(twice.status).toBe(400);
      expect(twice.body.code).toBe('idempotency_key_invalid');
    });

    it('accepts 255 characters, and the quoted form names the same key as the bare one', async () => {
      const key = `q${'x'.repeat(250)}${seq++}`.slice(0, 255);
      const first = await post('/orders', key);
      expect(first.status).toBe(201);
      const quoted = await post('/orders', `"${key}"`);
      expect(quoted.status).toBe(201);
      expect(quoted.headers['idempotent-replayed']).toBe('true');
      expect(quoted.text).toBe(first.text);
    });

    it('serves an optional route without a key, unprotected and unstored', async () => {
      const a = await post('/orders/optional', undefined, {});
      const b = await post('/orders/optional', undefined, {});
      expect(a.status).toBe(201);
      expect(b.body.run).toBe(a.body.run + 1);
      expect(b.headers['idempotent-replayed']).toBeUndefined();
    });
  });

  describe('first execution and replay (docs/design/contract.md#the-decision-table, docs/design/contract.md#what-is-stored)', () => {
    it('runs the handler once and replays status, allow-listed headers and exact bytes', async () => {
      const key = newKey();
      const rowsBefore = await orders();
      const first = await post('/orders', key, { amount: 7, note: 'ünïcödé' });
      expect(first.status).toBe(201);
      expect(first.headers.location).toMatch(/^\/orders\/\d+$/);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const stored = await record(key);
      expect(stored.status).toBe('completed');
      expect(stored.response_status).toBe(201);
      expect(Buffer.compare(stored.response_body, Buffer.from(first.text, 'utf8'))).toBe(0);
      expect(Object.keys(stored.response_headers).sort()).toEqual(['content-type', 'location']);

      const runs = t.probe.ran('create');
      const replay = await post('/orders', key, { note: 'ünïcödé', amount: 7 });
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers.location).toBe(first.headers.location);
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).toBe(first.text);
      expect(t.probe.ran('create')).toBe(runs);
      expect(await orders()).toBe(rowsBefore + 1);
    });

    it('treats reordered keys and whitespace as the same request', async () => {
      const key = newKey();
      const first = await request(t.server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .set('Content-Type', 'application/json')
        .send('{"amount":3,"note":"a"}');
      const again = await request(t.server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .set('Content-Type', 'application/json')
        .send('{ "note" : "a",\n "amount" : 3 }');
      expect(first.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.text).toBe(first.text);
    });

    it('answers 422 when the key is reused with another payload, in any state', async () => {
      const key = newKey();
      await post('/orders', key, { amount: 1 });
      const runs = t.probe.ran('create');
      const reused = await post('/orders', key, { amount: 2 });
      expect(reused.status).toBe(422);
      expect(reused.headers['content-type']).toMatch(PROBLEM);
      expect(reused.body).toMatchObject({
        code: 'idempotency_key_reused',
        title: 'Idempotency-Key is already used',
      });
      const otherPath = await post('/orders/text', key, { amount: 1 });
      expect(otherPath.status).toBe(422);
      expect(t.probe.ran('create')).toBe(runs);
    });

    it('answers 422 when the key is reused with another query string, the body the same', async () => {
      const key = newKey();
      const first = await post('/orders?currency=EUR', key, { amount: 4 });
      expect(first.status).toBe(201);
      const runs = t.probe.ran('create');
      const otherQuery = await post('/orders?currency=USD', key, { amount: 4 });
      expect(otherQuery.status).toBe(422);
      expect(otherQuery.body).toMatchObject({ code: 'idempotency_key_reused' });
      expect(t.probe.ran('create')).toBe(runs);
      // The same query again is a retry: replayed.
      const again = await post('/orders?currency=EUR', key, { amount: 4 });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.text).toBe(first.text);
      expect(t.probe.ran('create')).toBe(runs);
    });

    it('stores a deterministic 4xx thrown by the handler and replays it', async () => {
      const key = newKey();
      const first = await post('/orders/decline', key, {});
      expect(first.status).toBe(402);
      expect(first.body.error.code).toBe('card_declined');
      const replay = await post('/orders/decline', key, {});
      expect(replay.status).toBe(402);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(t.probe.ran('decline')).toBe(1);
    });

    it('replays text bodies with their content type', async () => {
      const key = newKey();
      const first = await post('/orders/text', key, {});
      const replay = await post('/orders/text', key, {});
      expect(first.status).toBe(201);
      expect(first.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).toBe(first.text);
    });

    it.each([
      ['crash', 500],
      ['unavailable', 503],
      ['conflict', 409],
      ['throttled', 429],
    ])(
      'does not store %s (%i): the key is released and a retry runs again',
      async (route, status) => {
        const key = newKey();
        const runs = t.probe.ran(route);
        const first = await post(`/orders/${route}`, key, {});
        expect(first.status).toBe(status);
        expect((await record(key)).status).toBe('released');
        const retry = await post(`/orders/${route}`, key, {});
        expect(retry.status).toBe(status);
        expect(retry.headers['idempotent-replayed']).toBeUndefined();
        expect(t.probe.ran(route)).toBe(runs + 2);
        expect((await post(`/orders/${route}`, key, { other: true })).status).toBe(422);
      },
    );

    it('does not store a request the ValidationPipe rejected: the key works with a fixed body', async () => {
      const key = newKey();
      const runs = t.probe.ran('create');
      const bad = await post('/orders', key, { amount: 'lots' });
      expect(bad.status).toBe(400);
      expect(bad.headers['idempotent-replayed']).toBeUndefined();
      expect(await record(key)).toBeUndefined();
      const fixed = await post('/orders', key, { amount: 9 });
      expect(fixed.status).toBe(201);
      expect(t.probe.ran('create')).toBe(runs + 1);
    });

    it('checks the key after the auth guards: a denied caller gets their 401, not a 400', async () => {
      // The controller binds its auth guard above @Idempotent(); the key is still checked after it.
      const denied = await post('/orders', undefined).set('x-user', 'deny');
      expect(denied.status).toBe(401);
      const malformed = await post('/orders', 'bad key, with comma').set('x-user', 'deny');
      expect(malformed.status).toBe(401);
      expect((await post('/orders', undefined)).status).toBe(400);
    });

    it('does not store a request an auth guard rejected', async () => {
      const key = newKey();
      const denied = await post('/orders', key).set('x-user', 'deny');
      expect(denied.status).toBe(401);
      expect(await record(key)).toBeUndefined();
      expect((await post('/orders', key)).status).toBe(201);
    });

    it('does not store a stream: the key is released and a retry runs again', async () => {
      const key = newKey();
      const first = await post('/orders/stream', key, {});
      expect(first.status).toBe(201);
      expect(Buffer.from(first.body ?? first.text).toString()).toContain('chunk-1');
      await waitFor(async () => (await record(key))?.status === 'released');
      await post('/orders/stream', key, {});
      expect(t.probe.ran('stream')).toBe(2);
    });

    it('covers PUT, PATCH and DELETE from the class decorator, and leaves GET alone', async () => {
      for (const method of ['put', 'patch', 'delete'] as const) {
        const key = newKey();
        const missing = await request(t.server)[method]('/orders/1');
        expect(missing.status).toBe(400);
        const first = await request(t.server)[method]('/orders/1').set('Idempotency-Key', key);
        const again = await request(t.server)[method]('/orders/1').set('Idempotency-Key', key);
        expect(first.status).toBe(200);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(t.probe.ran(method)).toBe(1);
      }
      const key = newKey();
      await request(t.server).get('/orders').set('Idempotency-Key', key).expect(200);
      await request(t.server).get('/orders').set('Idempotency-Key', key).expect(200);
      await request(t.server).get('/orders').expect(200);
      expect(await record(key)).toBeUndefined();
    });
  });

  describe('scopes (docs/design/contract.md#the-key)', () => {
    it('keeps the same key of two callers apart', async () => {
      const key = newKey();
      const alice = await post('/orders', key, { amount: 10 }).set('x-user', 'alice');
      const bob = await post('/orders', key, { amount: 20 }).set('x-user', 'bob');
      expect(alice.status).toBe(201);
      expect(bob.status).toBe(201);
      expect(bob.body.id).not.toBe(alice.body.id);
      const aliceAgain = await post('/orders', key, { amount: 10 }).set('x-user', 'alice');
      expect(aliceAgain.headers['idempotent-replayed']).toBe('true');
      expect(aliceAgain.body.id).toBe(alice.body.id);
      const anonymous = await post('/orders', key, { amount: 10 });
      expect(anonymous.headers['idempotent-replayed']).toBeUndefined();
      expect(anonymous.body.id).not.toBe(alice.body.id);
    });
  });

  describe('concurrency (docs/design/contract.md#the-decision-table)', () => {
    it('answers 409 with Retry-After while the first request runs, then replays', async () => {
      const key = newKey();
      const gate = `gate-${key}`;
      const first = post('/orders', key, { amount: 4, gate }).then((r) => r);
      await waitFor(async () => (await record(key))?.status === 'in_flight');
      const second = await post('/orders', key, { amount: 4, gate });
      expect(second.status).toBe(409);
      expect(second.headers['retry-after']).toBe('1');
      expect(second.body).toMatchObject({
        code: 'idempotency_key_in_use',
        title: 'A request is outstanding for this Idempotency-Key',
      });
      const mismatch = await post('/orders', key, { amount: 5, gate });
      expect(mismatch.status).toBe(422);
      t.probe.open(`${gate}#1`);
      expect((await first).status).toBe(201);
      const replay = await post('/orders', key, { amount: 4, gate });
      expect(replay.headers['idempotent-replayed']).toBe('true');
    });

    it('runs the handler exactly once for 30 concurrent identical requests', async () => {
      const key = newKey();
      const runs = t.probe.ran('create');
      const rows = await orders();
      const responses = await Promise.all(
        Array.from({ length: 30 }, () => post('/orders', key, { amount: 8 })),
      );
      const statuses = responses.map((r) => r.status);
      expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
      const executed = responses.filter(
        (r) => r.status === 201 && !r.headers['idempotent-replayed'],
      );
      expect(executed).toHaveLength(1);
      expect(t.probe.ran('create')).toBe(runs + 1);
      expect(await orders()).toBe(rows + 1);
    });
  });

  describe('transactional completion (docs/design/contract.md#transactional-completion)', () => {
    it('commits the handler writes with the completion', async () => {
      const key = newKey();
      const rows = await orders();
      const first = await post('/orders/tx', key, { amount: 11 });
      expect(first.status).toBe(201);
      expect((await record(key)).status).toBe('completed');
      const replay = await post('/orders/tx', key, { amount: 11 });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(await orders()).toBe(rows + 1);
    });

    it('rolls back the handler writes when it fails, and a retry starts clean', async () => {
      const key = newKey();
      const rows = await orders();
      const failed = await post('/orders/tx', key, { amount: 12, fail: true });
      expect(failed.status).toBe(500);
      expect(await orders()).toBe(rows);
      expect((await record(key)).status).toBe('released');
      const runs = t.probe.ran('tx');
      const retry = await post('/orders/tx', key, { amount: 12, fail: true });
      expect(retry.status).toBe(500);
      expect(t.probe.ran('tx')).toBe(runs + 1);
      expect(await orders()).toBe(rows);
    });

    it('gives a handler a derived key that is stable across retries and differs per key', async () => {
      const key = newKey();
      const failed = await post('/orders/derived', key, { fail: true });
      expect(failed.status).toBe(503);
      const ok = await post('/orders/derived', key, { fail: true }).catch(() => undefined);
      expect(ok?.status).toBe(503);
      const [a, b] = t.probe.derivedKeys.slice(-2);
      expect(a).toMatch(/^[0-9a-f]{64}$/);
      expect(b).toBe(a);
      const other = await post('/orders/derived', newKey(), {});
      expect(other.status).toBe(201);
      expect(other.body.derived).not.toBe(a);
      expect(other.body.identity).toMatchObject({ scope: '', attempt: 1 });
    });
  });
});
