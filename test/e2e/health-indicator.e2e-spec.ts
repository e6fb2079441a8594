/**
 * `IdempotencyHealthIndicator` (`nest-idempotency/terminus`): up on a healthy store with its
 * counts; down past each threshold (records stuck in flight past their lease, the purge
 * backlog, unfinished operations) and when the store does not answer within `timeoutMs`
 * (PostgreSQL behind a proxy that freezes). Through terminus's `HealthCheckService`, so a
 * down check answers 503.
 */
import { Controller, Get, Module, Query } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import { IdempotencyModule } from '../../lib';
import { IdempotencyHealthIndicator } from '../../lib/health';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { FrozenProxy } from '../fixtures/frozen-proxy';
import { OrdersController, Probe } from '../fixtures/orders.controller';
import { startApp, testTypeOrmModule } from '../fixtures/test-app';
import type { INestApplication } from '@nestjs/common';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  /** Thresholds from the query string, so one app serves every case. */
  @Get()
  @HealthCheck()
  check(@Query() q: Record<string, string>) {
    const n = (name: string) => (q[name] === undefined ? undefined : Number(q[name]));
    return this.health.check([
      () =>
        this.idempotency.isHealthy('idempotency', {
          timeoutMs: n('timeoutMs'),
          maxStuckInFlight: n('maxStuckInFlight'),
          maxPurgeBacklog: n('maxPurgeBacklog'),
          maxUnfinishedOperations: n('maxUnfinishedOperations'),
        }),
    ]);
  }
}

async function startHealthApp(url: string): Promise<INestApplication> {
  @Module({
    imports: [
      testTypeOrmModule(url),
      IdempotencyModule.forRoot({ purge: false }),
      TerminusModule.forRoot({ logger: false }),
    ],
    controllers: [HealthController, OrdersController],
    providers: [Probe, IdempotencyHealthIndicator],
  })
  class HealthTestModule {}
  return startApp('express', HealthTestModule);
}

describe('IdempotencyHealthIndicator', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let seq = 0;
  const post = () =>
    request(app.getHttpServer())
      .post('/orders')
      .set('Idempotency-Key', `health-${++seq}-${Date.now()}`)
      .send({ amount: 3 })
      .expect(201);
  const health = (query = '') => request(app.getHttpServer()).get(`/health${query}`);

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await startHealthApp(db.url);
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  beforeEach(() => db.query('DELETE FROM idempotency_records'));

  it('is up on a healthy store, with its counts', async () => {
    await post();
    const { body } = await health().expect(200);
    expect(body.status).toBe('ok');
    expect(body.info.idempotency).toEqual({
      status: 'up',
      stuckInFlight: 0,
      idleOperations: 0,
      abandonedOperations: 0,
      purgeBacklog: 0,
      latencyMs: expect.any(Number),
    });
  });

  it('counts records in flight past their lease, and is down past maxStuckInFlight', async () => {
    for (let i = 0; i < 3; i++) await post();
    await db.query(
      `UPDATE idempotency_records SET status = 'in_flight', owner_token = gen_random_uuid(),
              locked_until = now() - interval '1 minute'`,
    );
    await post(); // completed: not stuck
    const up = await health('?maxStuckInFlight=3').expect(200);
    expect(up.body.info.idempotency).toMatchObject({ status: 'up', stuckInFlight: 3 });

    const down = await health('?maxStuckInFlight=2').expect(503);
    expect(down.body.status).toBe('error');
    expect(down.body.error.idempotency).toMatchObject({
      status: 'down',
      stuckInFlight: 3,
      message: '3 records stuck in flight (max 2)',
    });
  });

  it('does not count a record whose lease is still running', async () => {
    await post();
    await db.query(
      `UPDATE idempotency_records SET status = 'in_flight', owner_token = gen_random_uuid(),
              locked_until = now() + interval '1 minute'`,
    );
    const { body } = await health('?maxStuckInFlight=0').expect(200);
    expect(body.info.idempotency.stuckInFlight).toBe(0);
  });

  it('counts the purge backlog, and is down past maxPurgeBacklog', async () => {
    for (let i = 0; i < 4; i++) await post();
    await db.query(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 second', purge_after = now() - interval '1 second'`,
    );
    const up = await health().expect(200);
    expect(up.body.info.idempotency).toMatchObject({ status: 'up', purgeBacklog: 4 });

    const down = await health('?maxPurgeBacklog=3').expect(503);
    expect(down.body.error.idempotency).toMatchObject({
      status: 'down',
      purgeBacklog: 4,
      message: 'purge backlog of 4 (max 3)',
    });
  });

  it('counts idle and abandoned operations in phases, down past maxUnfinishedOperations', async () => {
    for (let i = 0; i < 3; i++) await post();
    await db.query(
      `UPDATE idempotency_records SET operation = 'transfer', recovery_point = 'started', status = CASE
         WHEN ctid = (SELECT min(ctid) FROM idempotency_records)
         THEN 'abandoned' ELSE 'released' END, locked_until = NULL, owner_token = NULL`,
    );
    const up = await health().expect(200); // reported, not down by default
    expect(up.body.info.idempotency).toMatchObject({ idleOperations: 2, abandonedOperations: 1 });
    const down = await health('?maxUnfinishedOperations=2').expect(503);
    expect(down.body.error.idempotency.message).toBe('3 unfinished operations (max 2)');
  });

  describe('a store that does not answer', () => {
    let proxy: FrozenProxy;
    let frozenApp: INestApplication;

    beforeAll(async () => {
      proxy = await FrozenProxy.start();
      frozenApp = await startHealthApp(proxy.urlFor(db.url));
    });

    afterAll(async () => {
      await proxy?.close();
      await frozenApp?.close();
    });

    it('is down within timeoutMs, and up again once it answers', async () => {
      await request(frozenApp.getHttpServer()).get('/health').expect(200);
      proxy.freeze();
      const started = Date.now();
      let res: request.Response;
      try {
        res = await request(frozenApp.getHttpServer()).get('/health?timeoutMs=300');
      } finally {
        proxy.thaw();
      }
      const elapsed = Date.now() - started;
      expect(res.status).toBe(503);
      expect(res.body.error.idempotency).toEqual({
        status: 'down',
        message: expect.stringMatching(/^store unavailable: .*health check timed out after 300 ms/),
      });
      expect(elapsed).toBeGreaterThanOrEqual(280);
      expect(elapsed).toBeLessThan(2000);
      // The store's own timeout (5 s) closes the frozen connection; a new one answers.
      await waitForHealthy(frozenApp);
    }, 30_000);
  });
});

async function waitForHealthy(app: INestApplication): Promise<void> {
  const until = Date.now() + 20_000;
  for (;;) {
    const res = await request(app.getHttpServer()).get('/health');
    if (res.status === 200) return;
    if (Date.now() > until) throw new Error(`still ${res.status}: ${JSON.stringify(res.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
