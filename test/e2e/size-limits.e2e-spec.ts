/**
 * Size limits and routes that keep no body, on Express and Fastify against real PostgreSQL:
 * a request body over `maxRequestBytes` is refused with 413 before the key is claimed (sent
 * with a length, or chunked without one); a final response over `maxResponseBytes`, or on a
 * `storeBody: false` route (one that mints a secret), completes the record without its body, so
 * the handler never runs twice and a retry — on the same instance or another — gets 409
 * `idempotency_response_not_stored` with the stored `Location` and the completed status. Route
 * styles: a returned value, `@Res()`, `transactional: true` and an operation in phases.
 */
import type { AddressInfo } from 'node:net';
import { Body, Controller, Post, Res } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { IdempotencyOperations } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { rawRequest } from '../fixtures/raw-http';
import { CreateTransfer, TRANSFERS } from '../fixtures/phased-transfers';
import type { TransferInput } from '../fixtures/phased-transfers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

@Controller('limits')
class LimitsController {
  constructor(
    private readonly probe: Probe,
    private readonly operations: IdempotencyOperations,
  ) {}

  @Post('small-requests')
  @Idempotent({ request: { maxRequestBytes: 100 } })
  small(@Body() body: unknown) {
    this.probe.count('small');
    return body;
  }

  @Post('reports')
  @Idempotent({ responses: { maxResponseBytes: 64 } })
  report(@Body() body: { rows: number }) {
    this.probe.count('report');
    return { rows: Array.from({ length: body.rows }, (_, i) => `row-${i}`) };
  }

  @Post('api-keys')
  @Idempotent({ responses: { storeBody: false } })
  mint(@Body() body: { name: string }, @Res({ passthrough: true }) res: any) {
    this.probe.count('mint');
    const id = `key_${this.probe.ran('mint')}`;
    setLocation(res, `/api-keys/${id}`);
    return { id, name: body.name, secret: `sk_live_${id}_s3cr3t` };
  }

  @Post('api-keys-res')
  @Idempotent({ responses: { storeBody: false } })
  mintWithRes(@Body() body: { name: string }, @Res() res: any) {
    this.probe.count('mint-res');
    setLocation(res, '/api-keys/key_res');
    const payload = { id: 'key_res', name: body.name, secret: 'sk_live_res_s3cr3t' };
    if (typeof res.code === 'function') res.code(201).send(payload);
    else res.status(201).json(payload);
  }

  @Post('api-keys-tx')
  @Idempotent({ responses: { storeBody: false }, execution: { transactional: true } })
  mintInTransaction(@Body() body: { name: string }, @Res({ passthrough: true }) res: any) {
    this.probe.count('mint-tx');
    setLocation(res, '/api-keys/key_tx');
    return { id: 'key_tx', name: body.name, secret: 'sk_live_tx_s3cr3t' };
  }

  @Post('transfers')
  @Idempotent({ responses: { storeBody: false } })
  transfer(@Body() body: TransferInput) {
    this.probe.count('transfer');
    return this.operations.run(CreateTransfer, body);
  }
}

/** Sets `Location` through whichever adapter's response object the route got. */
function setLocation(res: any, location: string): void {
  if (typeof res.header === 'function' && typeof res.code === 'function') {
    res.header('location', location);
  } else {
    res.setHeader('location', location);
  }
}

describe.each(ADAPTERS)('size limits and bodies not kept (%s)', (adapter) => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let seq = 0;
  const newKey = () => `limits-${adapter}-${++seq}-${Date.now()}`;
  const row = async (key: string) =>
    (
      await db.query(
        `SELECT status, response_status, response_headers, response_body
           FROM idempotency_records WHERE idempotency_key = $1`,
        [key],
      )
    )[0];

  beforeAll(async () => {
    db = await createTestDatabase();
    const options = {
      controllers: [LimitsController, ...TRANSFERS.controllers],
      providers: TRANSFERS.providers,
      migrations: TRANSFERS.migrations,
      phases: { completer: false as const, jobs: false as const },
    };
    a = await createTestApp(adapter, db, options);
    b = await createTestApp(adapter, db, options);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  describe('maxRequestBytes', () => {
    it('refuses a larger body with 413 before the key is claimed; a smaller one runs', async () => {
      const key = newKey();
      const big = { note: 'x'.repeat(200) };
      const res = await request(a.server)
        .post('/limits/small-requests')
        .set('Idempotency-Key', key)
        .send(big);
      expect(res.status).toBe(413);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ status: 413, code: 'idempotency_request_too_large' });
      expect(res.body.detail).toContain('100 bytes');
      expect(a.probe.ran('small')).toBe(0);
      expect(await row(key)).toBeUndefined();

      // The key was never claimed: the same key with a body within the limit runs.
      const ok = await request(a.server)
        .post('/limits/small-requests')
        .set('Idempotency-Key', key)
        .send({ note: 'short' });
      expect(ok.status).toBe(201);
      expect(a.probe.ran('small')).toBe(1);
    });

    it('measures a chunked body that has no Content-Length', async () => {
      const key = newKey();
      await a.app.listen(0, '127.0.0.1');
      const { port } = a.server.address() as AddressInfo;
      const res = await rawRequest(port, {
        path: '/limits/small-requests',
        headers: [
          ['Idempotency-Key', key],
          ['Content-Type', 'application/json'],
        ],
        body: JSON.stringify({ note: 'y'.repeat(300) }),
        chunked: true,
      });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body.toString())).toMatchObject({
        code: 'idempotency_request_too_large',
      });
      expect(await row(key)).toBeUndefined();
      expect(a.probe.ran('small')).toBe(1); // only the earlier test's run
    });
  });

  describe('maxResponseBytes', () => {
    it('sends a larger response once, keeps it without its body, and never runs again', async () => {
      const key = newKey();
      const send = (app: TestApp) =>
        request(app.server).post('/limits/reports').set('Idempotency-Key', key).send({ rows: 20 });
      const first = await send(a);
      expect(first.status).toBe(201);
      expect(first.body.rows).toHaveLength(20);

      const stored = await row(key);
      expect(stored).toMatchObject({ status: 'completed', response_status: 201 });
      expect(stored.response_body).toEqual(Buffer.alloc(0));
      expect(stored.response_headers['x-nest-idempotency-body-omitted']).toBe('too_large');

      // From the instance that ran it (its cache) and from another (PostgreSQL).
      for (const app of [a, b]) {
        const retry = await send(app);
        expect(retry.status).toBe(409);
        expect(retry.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(retry.headers['retry-after']).toBeUndefined();
        expect(retry.headers['x-nest-idempotency-body-omitted']).toBeUndefined();
        expect(retry.body).toMatchObject({
          code: 'idempotency_response_not_stored',
          completedStatus: 201,
        });
        expect(retry.body.detail).toContain('too large');
      }
      expect(a.probe.ran('report') + b.probe.ran('report')).toBe(1);
    });

    it('stores and replays a response within the limit as usual', async () => {
      const key = newKey();
      const send = () =>
        request(a.server).post('/limits/reports').set('Idempotency-Key', key).send({ rows: 1 });
      const first = await send();
      const retry = await send();
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
    });
  });

  describe('storeBody: false (a route that mints a secret)', () => {
    it.each([
      ['a returned value', '/limits/api-keys', 'mint'],
      ['@Res()', '/limits/api-keys-res', 'mint-res'],
      ['transactional: true', '/limits/api-keys-tx', 'mint-tx'],
    ])('%s: the secret goes to the first client only', async (_style, path, handler) => {
      const key = newKey();
      const before = a.probe.ran(handler) + b.probe.ran(handler);
      const send = (app: TestApp) =>
        request(app.server).post(path).set('Idempotency-Key', key).send({ name: 'ci' });
      const first = await send(a);
      expect(first.status).toBe(201);
      expect(first.body.secret).toMatch(/^sk_live_/);
      const location = first.headers.location;
      expect(location).toMatch(/^\/api-keys\//);

      const stored = await row(key);
      expect(stored).toMatchObject({ status: 'completed', response_status: 201 });
      expect(stored.response_body).toEqual(Buffer.alloc(0));
      expect(JSON.stringify(stored)).not.toContain('sk_live_');

      for (const app of [a, b]) {
        const retry = await send(app);
        expect(retry.status).toBe(409);
        expect(retry.headers.location).toBe(location);
        expect(retry.body).toMatchObject({
          code: 'idempotency_response_not_stored',
          completedStatus: 201,
        });
        expect(retry.body.detail).toContain('secret');
        expect(retry.text).not.toContain('sk_live_');
      }
      expect(a.probe.ran(handler) + b.probe.ran(handler) - before).toBe(1);
    });

    it('an operation in phases: its last step answers the first client, nothing else', async () => {
      const key = newKey();
      const send = (app: TestApp) =>
        request(app.server)
          .post('/limits/transfers')
          .set('Idempotency-Key', key)
          .send({ amount: 7, to: 'acct_1' });
      const first = await send(a);
      expect(first.status).toBe(201);
      expect(first.body).toMatchObject({ amount: 7 });
      const stored = await row(key);
      expect(stored.response_body).toEqual(Buffer.alloc(0));
      for (const app of [a, b]) {
        const retry = await send(app);
        expect(retry.status).toBe(409);
        expect(retry.headers.location).toBe(first.headers.location);
        expect(retry.body).toMatchObject({ code: 'idempotency_response_not_stored' });
      }
      expect(await db.query('SELECT count(*)::int AS n FROM ledger')).toEqual([{ n: 1 }]);
    });
  });
});
