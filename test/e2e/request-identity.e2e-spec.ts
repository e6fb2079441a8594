/**
 * What identifies a request: its scope (whatever the `scope` resolver returns: a 3000-character
 * account id, a numeric user id, a wrong type) and its body (one nobody parsed must never be
 * replayed to a different one) — on Express and Fastify.
 */
import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { rawRequest } from '../fixtures/raw-http';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** A 3000-character value that does not compress, so its btree entry really is 3000 bytes. */
const longAccountId = () => randomBytes(2250).toString('base64url');

describe.each(ADAPTERS)('request identity on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  let seq = 0;
  const newKey = () => `ri-${adapter}-${++seq}-${Date.now()}`;
  let errorLog: jest.SpyInstance;
  let warnLog: jest.SpyInstance;

  const rows = (key: string) =>
    db.query<{ scope: string; status: string }>(
      'SELECT scope, status FROM idempotency_records WHERE idempotency_key = $1 ORDER BY scope',
      [key],
    );
  const logged = (spy: jest.SpyInstance) => spy.mock.calls.map((call) => String(call[0]));

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(() => {
    errorLog = jest.spyOn(Logger.prototype, 'error');
    warnLog = jest.spyOn(Logger.prototype, 'warn');
  });
  afterEach(async () => {
    errorLog.mockRestore();
    warnLog.mockRestore();
    await t?.close();
    t = undefined;
  });

  describe('scope', () => {
    it('stores a 3000-character scope as sha256:<hex>: 201, replay, another long scope with the same key runs on its own, no store_error', async () => {
      t = await createTestApp(adapter, db, {
        module: { request: { scope: (req) => req.headers['x-account-id'] } },
      });
      const key = newKey();
      const [alice, bob] = [longAccountId(), longAccountId()];
      const post = (account: string) =>
        request(t!.server)
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .set('X-Account-Id', account)
          .send({ amount: 100 });

      const first = await post(alice);
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ run: 1, kind: 'object' });
      const replay = await post(alice);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual({ run: 1, kind: 'object' });
      const other = await post(bob);
      expect(other.status).toBe(201);
      expect(other.headers['idempotent-replayed']).toBeUndefined();
      expect(other.body).toEqual({ run: 2, kind: 'object' });
      expect(t.probe.ran('any')).toBe(2);

      const stored = await rows(key);
      expect(stored).toHaveLength(2);
      for (const row of stored) {
        expect(row.scope).toMatch(/^sha256:[0-9a-f]{64}$/);
        expect(row.status).toBe('completed');
      }
      expect(stored[0].scope).not.toBe(stored[1].scope);
      expect(t.events.filter((event) => event.type === 'store_error')).toEqual([]);
      expect(logged(errorLog)).toEqual([]);
    });

    it('uses a numeric scope as its string form: 201, replay, user 7 and user 8 with one key are independent, stored as "7"', async () => {
      t = await createTestApp(adapter, db, {
        // A numeric user id, as many applications have; cast for the resolver type before numbers.
        module: { request: { scope: ((req: any) => Number(req.headers['x-user-num'])) as any } },
      });
      const key = newKey();
      const post = (user: string) =>
        request(t!.server)
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .set('X-User-Num', user)
          .send({ amount: 100 });

      const first = await post('7');
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ run: 1, kind: 'object' });
      const replay = await post('7');
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual({ run: 1, kind: 'object' });
      const other = await post('8');
      expect(other.status).toBe(201);
      expect(other.headers['idempotent-replayed']).toBeUndefined();
      expect(other.body).toEqual({ run: 2, kind: 'object' });
      expect(t.probe.ran('any')).toBe(2);
      expect(await rows(key)).toEqual([
        { scope: '7', status: 'completed' },
        { scope: '8', status: 'completed' },
      ]);
    });

    it('refuses a scope resolver that returns an object: 500 problem+json idempotency_scope_invalid, handler not run, nothing stored, an error log names the fix', async () => {
      t = await createTestApp(adapter, db, {
        module: { request: { scope: ((req: any) => ({ id: req.headers['x-user'] })) as any } },
      });
      const key = newKey();
      for (let attempt = 0; attempt < 2; attempt++) {
        const res = await request(t.server)
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .set('X-User', 'u1')
          .send({ amount: 100 });
        expect(res.status).toBe(500);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.headers['cache-control']).toBe('no-store');
        expect(res.body).toMatchObject({ status: 500, code: 'idempotency_scope_invalid' });
      }
      expect(t.probe.ran('any')).toBe(0);
      expect(await rows(key)).toEqual([]);
      const errors = logged(errorLog);
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.join('\n')).toMatch(/scope resolver returned an object.*return a string/s);
    });
  });

  describe('bodies nobody parsed', () => {
    it('never replays one text/plain body to another under the same key (no text parser, rawBody off)', async () => {
      t = await createTestApp(adapter, db);
      const key = newKey();
      const post = (text: string) =>
        request(t!.server)
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .set('Content-Type', 'text/plain')
          .send(text);

      // Same length, different amount: a fingerprint of type and length cannot tell them apart.
      const first = await post('amount=100');
      const second = await post('amount=999');
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(second.status).not.toBe(201);

      if (adapter === 'express') {
        // Express has no text parser by default: refused before anything is claimed.
        for (const res of [first, second]) {
          expect(res.status).toBe(415);
          expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(res.body).toMatchObject({ status: 415, code: 'idempotency_body_unreadable' });
        }
        expect(t.probe.ran('any')).toBe(0);
        expect(await rows(key)).toEqual([]);
        const warnings = logged(warnLog).join('\n');
        expect(warnings).toMatch(/rawBody: true/);
        expect(warnings).toMatch(/useBodyParser/);
        // The key stayed free: the same key with a body the app can read runs.
        const json = await request(t.server)
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .send({ amount: 100 });
        expect(json.status).toBe(201);
        expect(json.body).toEqual({ run: 1, kind: 'object' });
      } else {
        // Fastify parses text/plain itself: the two bodies are compared on their text.
        expect(first.status).toBe(201);
        expect(first.body).toEqual({ run: 1, kind: 'string' });
        expect(second.status).toBe(422);
        expect(second.body).toMatchObject({ code: 'idempotency_key_reused' });
        expect(t.probe.ran('any')).toBe(1);
        expect(await rows(key)).toEqual([{ scope: '', status: 'completed' }]);
      }
    });

    it('never replays one body of an unparsed type (application/x-custom) to another under the same key', async () => {
      t = await createTestApp(adapter, db);
      const key = newKey();
      const post = (text: string) =>
        request(t!.server)
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .set('Content-Type', 'application/x-custom')
          .send(text);

      const first = await post('amount=100');
      const second = await post('amount=999');
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      // Both adapters refuse it: the library on Express, Fastify itself (no parser for the type).
      expect(first.status).toBe(415);
      expect(second.status).toBe(415);
      if (adapter === 'express') {
        expect(second.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(second.body).toMatchObject({ code: 'idempotency_body_unreadable' });
      } else {
        // Fastify's FST_ERR_CTP_INVALID_MEDIA_TYPE, rendered by Nest's own exception filter.
        expect(second.headers['content-type']).toMatch(/^application\/json/);
        expect(second.body).toEqual({ statusCode: 415, message: 'Unsupported Media Type' });
      }
      expect(t.probe.ran('any')).toBe(0);
      expect(await rows(key)).toEqual([]);
    });

    it('never replays one chunked text/plain body (no content-length) to another under the same key', async () => {
      t = await createTestApp(adapter, db);
      await t.app.listen(0, '127.0.0.1');
      const port = t.server.address().port;
      const key = newKey();
      const post = (text: string) =>
        rawRequest(port, {
          path: '/orders/any',
          headers: [
            ['Idempotency-Key', key],
            ['Content-Type', 'text/plain'],
          ],
          body: text,
          chunked: true,
        });

      const first = await post('amount=100');
      const second = await post('amount=999');
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(second.status).not.toBe(201);
      if (adapter === 'express') {
        for (const res of [first, second]) {
          expect(res.status).toBe(415);
          expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
          expect(JSON.parse(res.body.toString())).toMatchObject({
            code: 'idempotency_body_unreadable',
          });
        }
        expect(t.probe.ran('any')).toBe(0);
        expect(await rows(key)).toEqual([]);
      } else {
        expect(first.status).toBe(201);
        // Fastify parses text/plain itself, chunked or not: compared on the text.
        expect(second.status).toBe(422);
        expect(t.probe.ran('any')).toBe(1);
        expect(await rows(key)).toEqual([{ scope: '', status: 'completed' }]);
      }
    });
  });

  it('fingerprints text/plain on its raw bytes with rawBody and a text parser: 201, 422 for other bytes, replay for the same bytes', async () => {
    // The setup the 415 warning tells an application to adopt.
    const { app, probe } = await createTestApp(adapter, db, { rawBody: true });
    try {
      const key = newKey();
      const post = (text: string) =>
        request(app.getHttpServer())
          .post('/orders/any')
          .set('Idempotency-Key', key)
          .set('Content-Type', 'text/plain')
          .send(text);

      const first = await post('amount=100');
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ run: 1, kind: 'string' });
      const other = await post('amount=999');
      expect(other.status).toBe(422);
      expect(other.body).toMatchObject({ code: 'idempotency_key_reused' });
      const same = await post('amount=100');
      expect(same.status).toBe(201);
      expect(same.headers['idempotent-replayed']).toBe('true');
      expect(same.body).toEqual({ run: 1, kind: 'string' });
      expect(probe.ran('any')).toBe(1);
    } finally {
      await app.close();
    }
  });
});
