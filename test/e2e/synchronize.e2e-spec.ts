/**
 * Development with `synchronize: true`: the library's entities describe every table it needs,
 * so an application that lists them gets a schema the module accepts and a route that claims,
 * stores and replays. Before, the entities had no jobs table and the module refused to start,
 * blaming "a table made before operations in phases" and suggesting an upgrade migration. With
 * an entity left out, the module says exactly what is missing and which entity makes it.
 */
import { Module } from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import { IdempotencyJobEntity, IdempotencyRecordEntity } from '../../lib/storage/typeorm';
import { IdempotencyModule, Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, startApp } from '../fixtures/test-app';
import { upgradeOrdersController } from '../fixtures/upgrade-orders.controller';

function synchronizedModule(url: string, entities: Type[]): Type {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url, entities, synchronize: true, logging: false }),
      IdempotencyModule.forRoot({ purge: false }),
    ],
    controllers: [upgradeOrdersController(Idempotent, 'synchronized')],
  })
  class SynchronizedModule {}
  return SynchronizedModule;
}

describe.each(ADAPTERS)('synchronize: true with the library entities on %s', (adapter) => {
  let db: TestDatabase;

  beforeEach(async () => {
    db = await createTestDatabase();
  });

  afterEach(async () => {
    await db?.drop();
  });

  it('starts, serves a key (201) and replays it', async () => {
    const app = await startApp(
      adapter,
      synchronizedModule(db.url, [IdempotencyRecordEntity, IdempotencyJobEntity]),
    );
    try {
      const server = app.getHttpServer();
      const first = await request(server)
        .post('/upgrade-orders')
        .set('Idempotency-Key', 'k1')
        .send({ amount: 4 });
      expect({ status: first.status, body: first.body }).toEqual({
        status: 201,
        body: { release: 'synchronized', run: 1, amount: 4 },
      });
      const again = await request(server)
        .post('/upgrade-orders')
        .set('Idempotency-Key', 'k1')
        .send({ amount: 4 });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      expect((await request(server).get('/upgrade-orders/runs')).body).toEqual({ runs: 1 });
    } finally {
      await app.close();
    }
  });

  it('with the jobs entity left out, refuses to start naming the jobs table and its entity', async () => {
    const error = await startApp(
      adapter,
      synchronizedModule(db.url, [IdempotencyRecordEntity]),
    ).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: Error) => e.message,
    );
    expect(error).toContain('missing what this version needs: table "idempotency_records_jobs".');
    expect(error).toContain('list both IdempotencyRecordEntity and IdempotencyJobEntity');
    expect(error).not.toMatch(/made before/);
  });
});
