/**
 * `errorBody` gives the library's errors the application's own shape. Tested with the official
 * Stripe Node SDK against a Stripe-shaped API built on the library: the SDK raises only when the
 * body has an `error` member, so with problem+json a 422, a 409 or a 400 would reach the caller
 * as if it were the created object. With a Stripe-style `errorBody` each raises the SDK's error
 * with the library's stable code, and status, `Retry-After` and `Cache-Control` are kept.
 */
import { Body, Controller, Post } from '@nestjs/common';
import request from 'supertest';
import Stripe from 'stripe';
import { Idempotent } from '../../lib';
import type { IdempotencyErrorBodyRenderer, IdempotencyProblem } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** Releases the handler of a charge created with `description: 'slow'`. */
let release: () => void = () => undefined;

@Controller('v1/charges')
class ChargesController {
  @Post()
  @Idempotent()
  async create(@Body() body: Record<string, string>) {
    if (body.description === 'slow') await new Promise<void>((resolve) => (release = resolve));
    return { id: 'ch_123', object: 'charge', amount: Number(body.amount), currency: body.currency };
  }
}

/** Stripe's error shape, as an application would write it (README "Errors"). */
const stripeErrors: IdempotencyErrorBodyRenderer = (problem: IdempotencyProblem) => ({
  body: {
    error: {
      type:
        problem.status === 400
          ? 'invalid_request_error'
          : problem.status >= 500
            ? 'api_error'
            : 'idempotency_error',
      code: problem.code,
      message: problem.detail,
    },
  },
});

describe.each(ADAPTERS)('errorBody with the Stripe SDK on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let stripe: Stripe;
  let n = 0;
  const key = () => `stripe-${adapter}-${++n}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [ChargesController],
      module: { errors: { errorBody: stripeErrors } },
    });
    await t.app.listen(0, '127.0.0.1');
    const { port } = t.app.getHttpServer().address();
    stripe = new Stripe('sk_test_nest_idempotency', {
      host: '127.0.0.1',
      port,
      protocol: 'http',
      maxNetworkRetries: 0,
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const charge = (idempotencyKey: string, amount = 500, description?: string) =>
    stripe.charges.create({ amount, currency: 'usd', description }, { idempotencyKey });

  it('creates once and returns the replay as the same object', async () => {
    const k = key();
    const first = await charge(k);
    expect(first).toMatchObject({ id: 'ch_123', amount: 500, currency: 'usd' });
    const again = await charge(k);
    expect(again).toMatchObject({ id: 'ch_123', amount: 500 });
    expect(again.lastResponse.headers['idempotent-replayed']).toBe('true');
  });

  // The SDK picks its error class by status for v1 APIs (StripeIdempotencyError only on a 400);
  // the library keeps 422 and 409, so these raise StripeAPIError, with the type and code.
  it('raises the SDK error for a key reused with other parameters (422)', async () => {
    const k = key();
    await charge(k, 500);
    const error = await charge(k, 501).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Stripe.errors.StripeAPIError);
    expect(error).toMatchObject({
      statusCode: 422,
      rawType: 'idempotency_error',
      code: 'idempotency_key_reused',
    });
    expect((error as Stripe.errors.StripeError).headers?.['cache-control']).toBe('no-store');
  });

  it('raises the SDK error for a key still in use (409), with Retry-After', async () => {
    const k = key();
    const slow = charge(k, 700, 'slow');
    const error = await (async () => {
      // The first request holds the key until it is released below.
      for (let i = 0; i < 100; i++) {
        const attempt = await charge(k, 700, 'slow').catch((e: unknown) => e);
        if (attempt instanceof Stripe.errors.StripeError) return attempt;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      return undefined;
    })();
    release();
    await slow;
    expect(error).toBeInstanceOf(Stripe.errors.StripeAPIError);
    expect(error).toMatchObject({
      statusCode: 409,
      rawType: 'idempotency_error',
      code: 'idempotency_key_in_use',
    });
    expect(error?.headers?.['retry-after']).toBe('1');
  });

  it('raises StripeInvalidRequestError for an invalid key (400)', async () => {
    const error = await charge('k'.repeat(300)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    expect(error).toMatchObject({ statusCode: 400, code: 'idempotency_key_invalid' });
  });

  it('sends the shaped body as JSON, or with the content type the renderer gives', async () => {
    const res = await request(t.server).post('/v1/charges').send({ amount: 1 });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toEqual({
      error: {
        type: 'invalid_request_error',
        code: 'idempotency_key_missing',
        message: expect.stringContaining('Idempotency-Key'),
      },
    });
  });
});

describe.each(ADAPTERS)('an errorBody that fails on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [ChargesController],
      module: {
        errors: {
          errorBody: () => {
            throw new Error('renderer bug');
          },
        },
      },
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('answers with problem+json instead, status kept', async () => {
    const res = await request(t.server).post('/v1/charges').send({ amount: 1 });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ code: 'idempotency_key_missing' });
  });
});
