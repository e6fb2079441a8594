/**
 * `@SkipIdempotency()` leaves one method of a controller under a class-level `@Idempotent()`
 * unprotected: it needs no key, runs on every request, claims and fingerprints nothing and is not
 * documented as idempotent; its sibling keeps the full protection. On Express and Fastify.
 */
import { Body, Controller, Post } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import request from 'supertest';
import { Idempotent, SkipIdempotency } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

@Controller('quotes')
@Idempotent()
class QuotesController {
  constructor(private readonly probe: Probe) {}

  @Post()
  create(@Body() body: { note: string }) {
    this.probe.count(`create:${body.note}`);
    return { created: this.probe.ran(`create:${body.note}`) };
  }

  @Post('preview')
  @SkipIdempotency()
  preview(@Body() body: { note: string; amount?: number }) {
    this.probe.count(`preview:${body.note}`);
    return { run: this.probe.ran(`preview:${body.note}`), amount: body.amount ?? null };
  }
}

describe.each(ADAPTERS)('@SkipIdempotency() under a class-level @Idempotent() (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `skip-${adapter}-${++n}-${Date.now()}`;

  async function recordsOf(key: string): Promise<number> {
    const [row] = await db.query<{ n: string }>(
      'SELECT count(*) AS n FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    return Number(row.n);
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: [QuotesController] });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('the skipped method needs no key and runs on every request', async () => {
    const note = newKey();
    const first = await request(t.server).post('/quotes/preview').send({ note });
    const second = await request(t.server).post('/quotes/preview').send({ note });
    expect([first.status, first.body]).toEqual([201, { run: 1, amount: null }]);
    expect([second.status, second.body]).toEqual([201, { run: 2, amount: null }]);
    expect(t.probe.ran(`preview:${note}`)).toBe(2);
  });

  it('with a key, it still runs every time, compares no bodies and writes no record', async () => {
    const key = newKey();
    const send = (amount: number) =>
      request(t.server)
        .post('/quotes/preview')
        .set('Idempotency-Key', key)
        .send({ note: key, amount });
    const first = await send(1);
    // Same key, another body: a protected route would answer 422.
    const second = await send(2);
    expect([first.status, first.body]).toEqual([201, { run: 1, amount: 1 }]);
    expect([second.status, second.body]).toEqual([201, { run: 2, amount: 2 }]);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(t.probe.ran(`preview:${key}`)).toBe(2);
    expect(await recordsOf(key)).toBe(0);
  });

  it('its sibling is still protected: 400 without a key, one run and a replay with one', async () => {
    const note = newKey();
    const missing = await request(t.server).post('/quotes').send({ note });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('idempotency_key_missing');

    const key = newKey();
    const send = () =>
      request(t.server).post('/quotes').set('Idempotency-Key', key).send({ note: key });
    const first = await send();
    const retry = await send();
    expect([first.status, first.body]).toEqual([201, { created: 1 }]);
    expect([retry.status, retry.body, retry.headers['idempotent-replayed']]).toEqual([
      201,
      { created: 1 },
      'true',
    ]);
    expect(t.probe.ran(`create:${note}`)).toBe(0);
    expect(t.probe.ran(`create:${key}`)).toBe(1);
    expect(await recordsOf(key)).toBe(1);
  });

  it('is not documented as idempotent in the OpenAPI document; its sibling is', () => {
    const document: any = SwaggerModule.createDocument(t.app, new DocumentBuilder().build());
    const keyHeaders = (operation: any) =>
      (operation.parameters ?? []).filter((p: any) => p.in === 'header').map((p: any) => p.name);
    expect(keyHeaders(document.paths['/quotes'].post)).toEqual(['Idempotency-Key']);
    expect(keyHeaders(document.paths['/quotes/preview'].post)).toEqual([]);
    expect(Object.keys(document.paths['/quotes/preview'].post.responses)).toEqual(['201']);
  });
});
