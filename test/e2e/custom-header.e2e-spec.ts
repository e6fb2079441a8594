/**
 * With another key header configured (`header: 'X-Request-Key'`, for the module or one route),
 * the 400s a client gets for a missing or invalid key name that header in their `title` and
 * `detail`, not the default `Idempotency-Key`. On Express and Fastify.
 */
import { Body, Controller, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { OrdersController, Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

@Controller('transfers')
class TransfersController {
  constructor(private readonly probe: Probe) {}

  @Post()
  @Idempotent({ request: { header: 'X-Transfer-Key' } })
  create(@Body() body: unknown) {
    this.probe.count('transfer');
    return body;
  }
}

describe.each(ADAPTERS)('a configured key header in the 400s (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      module: { request: { header: 'X-Request-Key' } },
      controllers: [OrdersController, TransfersController],
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it.each([
    ['the module', '/orders', 'X-Request-Key', 'create'],
    ['one route', '/transfers', 'X-Transfer-Key', 'transfer'],
  ])('%s: a missing key is "<header> is missing"', async (_where, path, header, handler) => {
    const res = await request(t.server).post(path).send({ amount: 5 });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({
      status: 400,
      code: 'idempotency_key_missing',
      title: `${header} is missing`,
    });
    expect(res.body.detail).toContain(`needs an ${header} header`);
    expect(t.probe.ran(handler)).toBe(0);
  });

  it.each([
    ['the module', '/orders', 'X-Request-Key'],
    ['one route', '/transfers', 'X-Transfer-Key'],
  ])('%s: an invalid key is "<header> is invalid"', async (_where, path, header) => {
    const res = await request(t.server).post(path).set(header, 'a,b').send({ amount: 5 });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      status: 400,
      code: 'idempotency_key_invalid',
      title: `${header} is invalid`,
    });
    expect(res.body.detail).toContain(`The ${header} header is invalid`);
  });
});
