/**
 * How the module plugs into an application: a named DataSource, @nestjs/schedule, configured
 * fingerprint headers, raw non-JSON bodies and the events stream — on Express and Fastify.
 */
import { Body, Controller, Module, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import request from 'supertest';
import { IDEMPOTENCY_PURGE_INTERVAL } from '../../lib/purge/idempotency-purge.service';
import { IdempotencyEvents, IdempotencyModule, Idempotent } from '../../lib';
import type { IdempotencyEvent, IdempotencyModuleOptions } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, startApp, testTypeOrmModule } from '../fixtures/test-app';
import type { AdapterName } from '../fixtures/test-app';
import { typeOrmStore } from '../../lib/storage/typeorm';

let runs = 0;

@Controller('echo')
class EchoController {
  @Post()
  @Idempotent()
  echo(@Body() body: unknown) {
    runs++;
    return { run: runs, body };
  }
}

async function start(
  adapter: AdapterName,
  db: TestDatabase,
  module: IdempotencyModuleOptions,
  extra: { named?: boolean; schedule?: boolean } = {},
): Promise<INestApplication> {
  @Module({
    imports: [
      testTypeOrmModule(db.url, { name: extra.named ? 'billing' : undefined }),
      ...(extra.schedule ? [ScheduleModule.forRoot()] : []),
      IdempotencyModule.forRoot({ purge: false, ...module }),
    ],
    controllers: [EchoController],
  })
  class AppModule {}
  return startApp(adapter, AppModule, { rawBody: true });
}

describe.each(ADAPTERS)('integration points on %s', (adapter) => {
  let db: TestDatabase;
  let seq = 0;
  const newKey = () => `ip-${adapter}-${++seq}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('uses a named DataSource', async () => {
    const app = await start(
      adapter,
      db,
      { store: typeOrmStore({ dataSource: 'billing' }) },
      { named: true },
    );
    try {
      const key = newKey();
      const first = await request(app.getHttpServer())
        .post('/echo')
        .set('Idempotency-Key', key)
        .send({ a: 1 });
      const again = await request(app.getHttpServer())
        .post('/echo')
        .set('Idempotency-Key', key)
        .send({ a: 1 });
      expect(first.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(
        await db.query('SELECT status FROM idempotency_records WHERE idempotency_key = $1', [key]),
      ).toEqual([{ status: 'completed' }]);
    } finally {
      await app.close();
    }
  });

  it('fails at bootstrap, naming the fix, when the DataSource name is wrong', async () => {
    await expect(
      start(adapter, db, { store: typeOrmStore({ dataSource: 'nope' }) }),
    ).rejects.toThrow(/no TypeORM DataSource named "nope"/);
  });

  it('registers the purge interval in @nestjs/schedule and removes it on shutdown', async () => {
    const app = await start(adapter, db, { purge: { intervalSeconds: 30 } }, { schedule: true });
    const registry = app.get(SchedulerRegistry);
    expect(registry.getIntervals()).toContain(IDEMPOTENCY_PURGE_INTERVAL);
    await app.close();
    expect(registry.getIntervals()).not.toContain(IDEMPOTENCY_PURGE_INTERVAL);
  });

  it('puts configured headers into the fingerprint', async () => {
    const app = await start(adapter, db, { request: { fingerprintHeaders: ['X-Region'] } });
    try {
      const key = newKey();
      const post = (region: string) =>
        request(app.getHttpServer())
          .post('/echo')
          .set('Idempotency-Key', key)
          .set('x-region', region)
          .send({ a: 1 });
      expect((await post('eu')).status).toBe(201);
      expect((await post('eu')).headers['idempotent-replayed']).toBe('true');
      expect((await post('us')).status).toBe(422);
    } finally {
      await app.close();
    }
  });

  it('fingerprints a non-JSON body on its raw bytes', async () => {
    const app = await start(adapter, db, {});
    try {
      const key = newKey();
      const post = (text: string) =>
        request(app.getHttpServer())
          .post('/echo')
          .set('Idempotency-Key', key)
          .set('Content-Type', 'text/plain')
          .send(text);
      expect((await post('hello')).status).toBe(201);
      expect((await post('hello')).headers['idempotent-replayed']).toBe('true');
      expect((await post('hellp')).status).toBe(422);
    } finally {
      await app.close();
    }
  });

  it('publishes executed, replayed and rejected events', async () => {
    const app = await start(adapter, db, {});
    const events: IdempotencyEvent[] = [];
    app.get(IdempotencyEvents).subscribe((e) => events.push(e));
    try {
      const key = newKey();
      await request(app.getHttpServer()).post('/echo').set('Idempotency-Key', key).send({ a: 1 });
      await request(app.getHttpServer()).post('/echo').set('Idempotency-Key', key).send({ a: 1 });
      await request(app.getHttpServer()).post('/echo').set('Idempotency-Key', key).send({ a: 2 });
      await request(app.getHttpServer()).post('/echo').send({ a: 2 });
      expect(events).toEqual([
        expect.objectContaining({ type: 'executed', key, status: 201, stored: true, attempt: 1 }),
        expect.objectContaining({ type: 'replayed', key, status: 201 }),
        expect.objectContaining({
          type: 'rejected',
          key,
          code: 'idempotency_key_reused',
          status: 422,
        }),
        expect.objectContaining({ type: 'rejected', code: 'idempotency_key_missing', status: 400 }),
      ]);
    } finally {
      await app.close();
    }
  });
});
