/**
 * Waiting behind a real PgBouncer in transaction pooling mode, where LISTEN cannot work (a
 * notification goes to whichever server connection ran the LISTEN, shared by every client): the
 * store's self-test finds that a notification sent through the pool never reaches its listening
 * connection and gives up listening, and a waiter on instance B is woken by its poll
 * (`wait.pollIntervalSeconds`: 0.2 s) when instance A completes the key. Both adapters. Skipped,
 * saying why, where pgbouncer is not installed.
 */
import request from 'supertest';
import { typeOrmStore } from '../../lib/storage/typeorm';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { findPgBouncer, startPgBouncer } from '../fixtures/pgbouncer';
import type { PgBouncer } from '../fixtures/pgbouncer';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';
import { WaitingController, typeOrmWakeUpsOf, waitersOf } from '../fixtures/waiting.controller';

const found = findPgBouncer();

if (!('bin' in found)) {
  // Skipped only without a PgBouncer binary (.ci/run installs one); the title says how to get it.
  describe.skip(`waiting behind PgBouncer (${found.missing})`, () => {
    it('is skipped', () => undefined);
  });
} else {
  describe.each(ADAPTERS)(
    'waiting behind PgBouncer in transaction pooling mode (%s)',
    (adapter) => {
      let bouncer: PgBouncer;
      let db: TestDatabase;
      let a: TestApp;
      let b: TestApp;

      beforeAll(async () => {
        bouncer = await startPgBouncer(found.bin, 2);
        db = await createTestDatabase();
        const options = {
          databaseUrl: bouncer.through(db.url),
          controllers: [WaitingController],
          module: {
            request: { scope: () => 'waiting' },
            store: typeOrmStore({ preparedStatements: false, timeoutSeconds: 2 }),
          },
        };
        a = await createTestApp(adapter, db, options);
        b = await createTestApp(adapter, db, options);
      });

      afterAll(async () => {
        await a?.close();
        await b?.close();
        await db?.drop();
        await bouncer?.stop();
      });

      const post = (t: TestApp, key: string, prefer?: string) => {
        const req = request(t.server).post('/waiting/polled').set('Idempotency-Key', key);
        return (prefer ? req.set('Prefer', prefer) : req).send({ gate: key });
      };

      it('finds LISTEN cannot work and polls; a waiter on B gets A’s answer at its next poll', async () => {
        // B's first request of a waiting route opens its listening connection and self-tests it.
        b.probe.open(`warm-${adapter}#1`);
        expect((await post(b, `warm-${adapter}`)).status).toBe(201);
        await waitFor(async () => typeOrmWakeUpsOf(b.app)?.status === 'polling', 10_000);
        expect(typeOrmWakeUpsOf(b.app)?.pushing).toBe(false);

        const key = `pgb-wait-${adapter}-${Date.now()}`;
        const first = post(a, key).then((response) => response);
        await waitFor(async () => a.probe.ran('polled') === 1);
        const waiter = post(b, key, 'wait=10').then((response) => ({
          response,
          at: performance.now(),
        }));
        await waitFor(async () => waitersOf(b.app) === 1);
        const opened = performance.now();
        a.probe.open(`${key}#1`);
        const original = await first;
        const { response, at } = await waiter;
        if (process.env.WAIT_LATENCY_LOG)
          console.log(`poll behind PgBouncer: ${Math.round(at - opened)} ms`);
        expect(original.status).toBe(201);
        expect(response.status).toBe(201);
        expect(response.headers['idempotent-replayed']).toBe('true');
        expect(response.text).toBe(original.text);
        expect(at - opened).toBeLessThan(2000);
        expect(b.probe.ran('polled')).toBe(1);
      });
    },
  );
}
