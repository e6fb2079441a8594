/**
 * Leases, takeovers and stale owners (docs/design/contract.md#the-decision-table, docs/design/contract.md#what-is-stored, docs/design/contract.md#transactional-completion), the TTL purge, fail-closed behaviour
 * when PostgreSQL is unreachable, and forRootAsync — on Express and Fastify, real PostgreSQL.
 */
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { CreateIdempotencyRecords1732233600000 } from '../../lib/storage/typeorm';
import { IDEMPOTENCY_OPTIONS } from '../../lib/config/idempotency.tokens';
import { IdempotencyModule, IdempotencyPurgeService } from '../../lib';
import type { IdempotencyModuleOptions } from '../../lib';
import type { ResolvedIdempotencyOptions } from '../../lib/interfaces/idempotency-module-options.interface';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { leaseLapsed, orderCount } from '../fixtures/record-queries';
import { waitFor } from '../fixtures/wait-for';

describe.each(ADAPTERS)('leases, purge and outages on %s', (adapter) => {
  let db: TestDatabase;
  let seq = 0;
  const newKey = () => `lease-${adapter}-${++seq}-${Date.now()}`;
  const record = async (key: string) =>
    (await db.query('SELECT * FROM idempotency_records WHERE idempotency_key = $1', [key]))[0];

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('a handler that outlives its lease', () => {
    let t: TestApp;
    beforeAll(async () => {
      // The heartbeat stops after 0.3 s, so a stuck handler's lease lapses within ~1.3 s, and
      // never before 1 s: the duplicate sent while it is live has a whole second to reach the
      // store even on a loaded host (with a 0.3 s lease it had 0.3 s).
      t = await createTestApp(adapter, db, {
        module: { execution: { lockTimeoutSeconds: 1, maxLockHoldSeconds: 0.3 } },
      });
    });
    afterAll(() => t?.close());

    /**
     * Sends the takeover once the lease has lapsed, and waits until it holds the key. A renewal
     * the heartbeat sent before the hold ended may reach the store after the lease was seen lapsed
     * and revive it (a loaded host): then the takeover is refused with 409 and sent again.
     */
    async function takeOver(key: string, send: () => Promise<request.Response>) {
      for (let tries = 1; ; tries++) {
        await waitFor(() => leaseLapsed(db, key));
        const takeover = send();
        let answered: request.Response | undefined;
        void takeover.then((response) => (answered = response));
        await waitFor(async () => answered !== undefined || (await record(key))?.attempts === 2);
        if (!answered) return { takeover };
        expect(answered.status).toBe(409);
        if (tries === 3) throw new Error(`${key}: three takeovers were refused with 409`);
      }
    }

    /**
     * Starts a request that stalls past its lease, lets a second attempt take the key over and
     * finish, then lets the stale owner finish too — or fail, when `staleFails`.
     */
    async function staleOwnerRace(path: string, note: string, staleFails = false) {
      const key = newKey();
      const body = { amount: 3, note, gate: key };
      const send = () =>
        request(t.server)
          .post(path)
          .set('Idempotency-Key', key)
          .send(body)
          .then((r) => r);
      const stale = send();
      await waitFor(async () => (await record(key))?.status === 'in_flight');
      const whileLive = await send();
      const { takeover } = await takeOver(key, send).catch((error: unknown) => {
        // Let the held request go, or it keeps the app from closing after this failure.
        t.probe.open(`${key}#1`);
        throw error;
      });
      t.probe.open(`${key}#2`);
      const winner = await takeover;
      const storedAfterWinner = await record(key);
      if (staleFails) t.probe.fail(`${key}#1`);
      else t.probe.open(`${key}#1`);
      const late = await stale;
      const storedAfterLate = await record(key);
      return {
        key,
        whileLive,
        winner,
        storedAfterWinner,
        late,
        storedAfterLate,
        replay: await send(),
      };
    }

    it('is taken over; the stale owner changes nothing but still answers its own client', async () => {
      const note = `stale-${Date.now()}`;
      const { key, whileLive, winner, storedAfterWinner, late, storedAfterLate, replay } =
        await staleOwnerRace('/orders', note);
      expect(whileLive.status).toBe(409);
      expect(winner.status).toBe(201);
      expect(storedAfterWinner.status).toBe('completed');
      expect(late.status).toBe(201);
      expect(late.body.id).not.toBe(winner.body.id);
      // Not one column changed: status, response, expiry, updated_at.
      expect(storedAfterLate).toEqual(storedAfterWinner);
      expect(storedAfterLate.response_body.toString()).toBe(winner.text);
      expect(t.events).toContainEqual(
        expect.objectContaining({ type: 'lock_lost', key, during: 'complete' }),
      );
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(winner.text);
      // Without the transactional mode both handlers wrote: that is what §7 exists for.
      expect(await orderCount(db, note)).toBe(2);
    });

    it.each(['/orders', '/orders/tx'])(
      'on %s, a stale owner that fails after the takeover completed releases nothing',
      async (path) => {
        const note = `stale-fail-${path}-${Date.now()}`;
        const { key, winner, storedAfterWinner, late, storedAfterLate, replay } =
          await staleOwnerRace(path, note, true);
        expect(winner.status).toBe(201);
        expect(late.status).toBe(500);
        expect(storedAfterLate).toEqual(storedAfterWinner);
        expect(storedAfterLate.status).toBe('completed');
        expect(t.events).toContainEqual(
          expect.objectContaining({ type: 'lock_lost', key, during: 'release' }),
        );
        expect(t.events).not.toContainEqual(expect.objectContaining({ type: 'released', key }));
        const runs = t.probe.ran(path === '/orders' ? 'create' : 'tx');
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.text).toBe(winner.text);
        expect(t.probe.ran(path === '/orders' ? 'create' : 'tx')).toBe(runs);
        expect(await orderCount(db, note)).toBe(1);
      },
    );

    it('in transactional mode rolls the stale owner back: one row, and its client gets 409', async () => {
      const note = `stale-tx-${Date.now()}`;
      const { key, winner, late, replay } = await staleOwnerRace('/orders/tx', note);
      expect(winner.status).toBe(201);
      expect(late.status).toBe(409);
      expect(late.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(late.body.code).toBe('idempotency_key_in_use');
      expect(await orderCount(db, note)).toBe(1);
      expect((await record(key)).response_body.toString()).toBe(winner.text);
      expect(replay.text).toBe(winner.text);
    });
  });

  describe('the TTL purge', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(adapter, db, {
        module: {
          responses: { ttlSeconds: 0.3 },
          execution: { lockTimeoutSeconds: 30 },
          purge: { intervalSeconds: 0.2, batchSize: 2 },
        },
      });
    });
    afterAll(() => t?.close());

    it('deletes expired records on its schedule, never a live lease, and an expired key runs anew', async () => {
      const done = [newKey(), newKey(), newKey()];
      for (const key of done) {
        expect(
          (await request(t.server).post('/orders').set('Idempotency-Key', key).send({ amount: 1 }))
            .status,
        ).toBe(201);
      }
      const held = newKey();
      const pending = request(t.server)
        .post('/orders')
        .set('Idempotency-Key', held)
        .send({ amount: 1, gate: held })
        .then((r) => r);
      await waitFor(async () => (await record(held))?.status === 'in_flight');

      await waitFor(async () => {
        const rows = await db.query(
          'SELECT idempotency_key FROM idempotency_records WHERE idempotency_key = ANY($1)',
          [[...done, held]],
        );
        return rows.length === 1;
      });
      // The rows go as soon as the purge's first delete commits; its event follows the run's
      // last batch and the reaper's statement.
      await waitFor(async () => t.events.some((e) => e.type === 'purged' && e.count > 0));
      expect((await record(held)).status).toBe('in_flight');

      t.probe.open(`${held}#1`);
      expect((await pending).status).toBe(201);
      const runs = t.probe.ran('create');
      const again = await request(t.server)
        .post('/orders')
        .set('Idempotency-Key', done[0])
        .send({ amount: 1 });
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(t.probe.ran('create')).toBe(runs + 1);
    });

    it('purgeExpired() deletes every expired record in batches and returns the count', async () => {
      await db.query(
        `INSERT INTO idempotency_records (scope, idempotency_key, record_id, fingerprint, status, expires_at, purge_after, method, path)
         SELECT 'bulk', 'k' || g, gen_random_uuid(), repeat('0', 64), 'completed', now() - interval '1 minute', now() - interval '1 minute', 'POST', '/x'
           FROM generate_series(1, 7) g`,
      );
      await db.query(
        `INSERT INTO idempotency_records (scope, idempotency_key, record_id, fingerprint, status, owner_token, locked_until, expires_at, purge_after, method, path)
         VALUES ('bulk', 'live', gen_random_uuid(), repeat('0', 64), 'in_flight', gen_random_uuid(), now() + interval '1 minute', now() - interval '1 minute', now() - interval '1 minute', 'POST', '/x')`,
      );
      const deleted = await t.app.get(IdempotencyPurgeService).purgeExpired();
      expect(deleted).toBeGreaterThanOrEqual(7);
      const left = await db.query(
        `SELECT idempotency_key FROM idempotency_records WHERE scope = 'bulk'`,
      );
      expect(left).toEqual([{ idempotency_key: 'live' }]);
    });
  });

  describe('when PostgreSQL is unreachable', () => {
    it('fails closed: 503 problem+json with Retry-After, and the handler never runs', async () => {
      const t = await createTestApp(adapter, db, { module: { errors: { retryAfterSeconds: 2 } } });
      try {
        await t.app.get(DataSource).destroy();
        const res = await request(t.server)
          .post('/orders')
          .set('Idempotency-Key', newKey())
          .send({ amount: 1 });
        expect(res.status).toBe(503);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.headers['retry-after']).toBe('2');
        expect(res.body.code).toBe('idempotency_store_unavailable');
        expect(t.probe.ran('create')).toBe(0);
      } finally {
        await t.close();
      }
    });
  });

  describe('forRootAsync', () => {
    @Injectable()
    class IdempotencyConfig {
      createIdempotencyOptions(): IdempotencyModuleOptions {
        return { responses: { ttlSeconds: 42 }, purge: false };
      }
    }

    it.each(['useFactory', 'useClass'] as const)(
      'accepts %s with imports and extraProviders',
      async (how) => {
        @Module({ providers: [{ provide: 'TTL', useValue: 43 }], exports: ['TTL'] })
        class ConfigModule {}
        const async =
          how === 'useFactory'
            ? IdempotencyModule.forRootAsync({
                imports: [ConfigModule],
                inject: ['TTL'],
                useFactory: (ttl: number) => ({ responses: { ttlSeconds: ttl }, purge: false }),
              })
            : IdempotencyModule.forRootAsync({ useClass: IdempotencyConfig, extraProviders: [] });
        const moduleRef = await Test.createTestingModule({
          imports: [
            TypeOrmModule.forRoot({
              type: 'postgres',
              url: db.url,
              migrations: [CreateIdempotencyRecords1732233600000],
              migrationsRun: true,
            }),
            async,
          ],
        }).compile();
        await moduleRef.init();
        const options = moduleRef.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
        expect(options.ttlSeconds).toBe(how === 'useFactory' ? 43 : 42);
        expect(options.lockTimeoutSeconds).toBe(60);
        await moduleRef.close();
      },
    );

    it('fails at bootstrap with a fix when an async option is wrong', async () => {
      const compile = Test.createTestingModule({
        imports: [
          IdempotencyModule.forRootAsync({
            useFactory: () => ({ responses: { ttlSeconds: -5 }, store: 'memory' }),
          }),
        ],
      }).compile();
      await expect(compile).rejects.toThrow(
        /option "responses.ttlSeconds".*from 0\.1 to 315360000/,
      );
    });
  });
});
