/**
 * A decorated route that is not transactional but reads `IdempotencyContext.entityManager` (a
 * developer error): the client gets a problem+json 500 with a stable code, the fix is logged
 * once per occurrence, nothing is stored and the key is released — on Express and Fastify.
 */
import { Body, Controller, Post } from '@nestjs/common';
import type { INestApplication, LoggerService } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyContext, Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';

let runs = 0;

const FIX =
  'nest-idempotency: no transaction here. IdempotencyContext.entityManager is only available ' +
  'inside a handler decorated with @Idempotent({ execution: { transactional: true } }) on the TypeORM store.';

@Controller('orders')
class NonTransactionalController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post()
  @Idempotent()
  async create(@Body() body: { amount: number }) {
    runs++;
    await this.idempotency.entityManager.query('SELECT $1::int', [body.amount]);
    return { ok: true };
  }
}

/** Keeps what the application logs at error level. */
class RecordingLogger implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

describe.each(ADAPTERS)('entityManager outside a transactional route on %s', (adapter) => {
  let db: TestDatabase;
  let app: INestApplication;
  const logger = new RecordingLogger();

  beforeAll(async () => {
    db = await createTestDatabase();
    const t = await createTestApp(adapter, db, {
      controllers: [NonTransactionalController],
      logger,
    });
    app = t.app;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('answers a problem+json 500, logs the fix once, stores nothing and releases the key', async () => {
    const key = `no-tx-${adapter}`;
    runs = 0;
    logger.errors.length = 0;
    const send = () =>
      request(app.getHttpServer()).post('/orders').set('Idempotency-Key', key).send({ amount: 5 });

    const first = await send();
    expect(first.status).toBe(500);
    expect(first.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(first.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(first.text)).toEqual({
      type: 'urn:nest-idempotency:problem:idempotency_transaction_unavailable',
      title: 'Idempotency transaction is unavailable',
      status: 500,
      detail:
        'The server could not process this request because of a configuration error. Its ' +
        'response was not stored.',
      code: 'idempotency_transaction_unavailable',
    });
    // Nothing else logs it: the developer message is in the log exactly once per occurrence.
    expect(logger.errors).toEqual([FIX]);
    expect(
      await db.query(
        'SELECT status, response_status, response_body FROM idempotency_records WHERE idempotency_key = $1',
        [key],
      ),
    ).toEqual([{ status: 'released', response_status: null, response_body: null }]);

    // Released, not stored: the retry runs the handler again (and fails the same way).
    const retry = await send();
    expect(retry.status).toBe(500);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(JSON.parse(retry.text).code).toBe('idempotency_transaction_unavailable');
    expect(runs).toBe(2);
    expect(logger.errors).toEqual([FIX, FIX]);
  });
});
