/**
 * A transactional route whose transaction loses its connection while the handler runs (cut
 * with `pg_terminate_backend`, as a failover or a proxy reset does): the handler's next query
 * fails, and the client gets 503 `idempotency_store_unavailable` with `Retry-After`, not a bare
 * 500; nothing is stored, the key is released and the retry runs — on Express and Fastify. The
 * history run met both cuts: between two statements (TypeORM then reports its query runner
 * released) and mid-statement.
 */
import { Body, Controller, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyContext, Idempotent } from '../../lib';
import { cutBackend } from '../fixtures/connection-cut';
import type { Cut } from '../fixtures/connection-cut';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';

/** What the test does to the handler's backend once the handler reports it, and the runs. */
const handlerSide = {
  runs: 0,
  /** Set by the test: called with the backend of the run's transaction; cuts it or not. */
  onBackend: async (_pid: number): Promise<void> => undefined,
};

@Controller('orders')
class CutController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post()
  @Idempotent({ execution: { transactional: true } })
  async create(@Body() body: { amount: number; cut: Cut }) {
    handlerSide.runs++;
    const manager = this.idempotency.entityManager;
    const [{ pid }] = await manager.query('SELECT pg_backend_pid() AS pid');
    const cutting = handlerSide.onBackend(pid);
    if (body.cut === 'mid-statement') await manager.query('SELECT pg_sleep(2)');
    await cutting;
    const [order] = await manager.query('INSERT INTO orders (amount) VALUES ($1) RETURNING id', [
      body.amount,
    ]);
    return { order: order.id };
  }
}

describe.each(ADAPTERS)('a transactional route whose connection is cut on %s', (adapter) => {
  let db: TestDatabase;
  let app: INestApplication;

  beforeAll(async () => {
    db = await createTestDatabase();
    const t = await createTestApp(adapter, db, {
      controllers: [CutController],
      module: { errors: { retryAfterSeconds: 1 } },
    });
    app = t.app;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each<Cut>(['between statements', 'mid-statement'])(
    'answers 503 idempotency_store_unavailable with Retry-After when cut %s, and the retry runs',
    async (cut) => {
      const key = `cut-${adapter}-${cut.replace(' ', '-')}`;
      handlerSide.runs = 0;
      handlerSide.onBackend = (pid) => cutBackend(db, pid, cut);
      const send = () =>
        request(app.getHttpServer())
          .post('/orders')
          .set('Idempotency-Key', key)
          .send({ amount: 7, cut });

      const cutOff = await send();
      expect(cutOff.status).toBe(503);
      expect(cutOff.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(cutOff.headers['retry-after']).toBe('1');
      expect(JSON.parse(cutOff.text).code).toBe('idempotency_store_unavailable');
      expect(await db.query('SELECT id FROM orders')).toEqual([]);
      expect(
        await db.query('SELECT status FROM idempotency_records WHERE idempotency_key = $1', [key]),
      ).toEqual([{ status: 'released' }]);

      handlerSide.onBackend = async () => undefined;
      const retry = await send();
      expect(retry.status).toBe(201);
      expect(handlerSide.runs).toBe(2);
      expect(await db.query('SELECT count(*)::int AS n FROM orders')).toEqual([{ n: 1 }]);
      await db.query('DELETE FROM orders');
    },
  );
});
