/**
 * A store of the user's own decides which of its errors mean it is unreachable
 * (`IdempotencyStore.isUnavailable()`): a transactional handler that fails with such an error
 * (its store's connection lost mid-transaction) gets 503 `idempotency_store_unavailable` with
 * `Retry-After` and a `store_error` event, not a 500; an error the store does not claim stays a
 * 500. The module wraps the store in its local-first layer, which asks the store it wraps — on
 * Express and Fastify.
 */
import { Controller, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import {
  IdempotencyEvents,
  IdempotencyModule,
  Idempotent,
  MemoryIdempotencyStore,
} from '../../lib';
import type { IdempotencyEvent } from '../../lib';
import { ADAPTERS } from '../fixtures/test-app';

/** What the store's client throws when its connection is gone. */
class StoreConnectionLost extends Error {}

/** A store of the user's own: it knows its client's connection errors. */
class ClassifyingStore extends MemoryIdempotencyStore {
  override isUnavailable(error: unknown): boolean {
    return error instanceof StoreConnectionLost;
  }
}

let runs = 0;

@Controller('orders')
class OrdersController {
  @Post('lost')
  @Idempotent({ execution: { transactional: true } })
  lost(): never {
    runs++;
    throw new StoreConnectionLost('connection to the store lost mid-transaction');
  }

  @Post('failed')
  @Idempotent({ execution: { transactional: true } })
  failed(): never {
    throw new Error('a statement failed');
  }
}

describe.each(ADAPTERS)("a custom store's own account of being unreachable on %s", (adapter) => {
  let app: INestApplication;
  const events: IdempotencyEvent[] = [];

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRoot({
          store: ClassifyingStore,
          request: { scope: () => 'test' },
          errors: { retryAfterSeconds: 2 },
        }),
      ],
      controllers: [OrdersController],
    }).compile();
    app =
      adapter === 'fastify'
        ? moduleRef.createNestApplication(new FastifyAdapter())
        : moduleRef.createNestApplication();
    await app.init();
    if (adapter === 'fastify') await app.getHttpAdapter().getInstance().ready();
    app.get(IdempotencyEvents).subscribe((event) => events.push(event));
  });
  afterAll(() => app?.close());

  const send = (path: string, key: string) =>
    request(app.getHttpServer()).post(`/orders/${path}`).set('Idempotency-Key', key).send({});

  it('answers 503 idempotency_store_unavailable with Retry-After, and the retry runs', async () => {
    runs = 0;
    events.length = 0;
    const first = await send('lost', `lost-${adapter}`);
    expect(first.status).toBe(503);
    expect(first.headers['retry-after']).toBe('2');
    expect(JSON.parse(first.text).code).toBe('idempotency_store_unavailable');
    expect(events).toContainEqual({
      type: 'store_error',
      operation: 'transaction',
      error: expect.any(StoreConnectionLost),
      route: 'POST /orders/lost',
    });

    const retry = await send('lost', `lost-${adapter}`);
    expect(retry.status).toBe(503);
    expect(runs).toBe(2);
  });

  it('leaves an error the store does not claim a 500', async () => {
    events.length = 0;
    const failed = await send('failed', `failed-${adapter}`);
    expect(failed.status).toBe(500);
    expect(events.some((event) => event.type === 'store_error')).toBe(false);
  });
});
