/**
 * Behind a real PgBouncer in transaction pooling mode (Debian's 1.18, which keeps no prepared
 * statements across server connections; `.ci/run` installs it): with the default named
 * statements the store's first use fails closed with a configuration error naming
 * `preparedStatements: false`; with it, the store conformance suite passes, plain and
 * transactional routes answer and replay, a same-key storm runs its handler once, and operations
 * in phases (docs/design/contract.md#operations-in-phases) run their steps once, resume at their recovery point, retry a SERIALIZABLE
 * step alone and deliver their staged jobs, on Express and Fastify. Skipped, saying why, where
 * pgbouncer is not installed.
 */
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { CreateIdempotencyRecords1732233600000 } from '../../lib/storage/typeorm';
import { IdempotencyJobs } from '../../lib/phases';
import { IdempotencyConfigurationError } from '../../lib/config/idempotency-configuration.error';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm/typeorm-idempotency.store';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks, conflictOnce } from '../fixtures/phased-transfers';
import { findPgBouncer, startPgBouncer } from '../fixtures/pgbouncer';
import type { PgBouncer } from '../fixtures/pgbouncer';
import { orderCount } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { describeIdempotencyStoreConformance } from '../../lib/testing';
import { typeOrmStore } from '../../lib/storage/typeorm';

const TABLE = 'idempotency_records';
const found = findPgBouncer();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

if (!('bin' in found)) {
  // Skipped only without a PgBouncer binary (.ci/run installs one); the title says how to get it.
  describe.skip(`behind PgBouncer (${found.missing})`, () => {
    it('is skipped', () => undefined);
  });
} else {
  describe('behind PgBouncer in transaction pooling mode', () => {
    let bouncer: PgBouncer;
    let db: TestDatabase;
    let dataSource: DataSource;

    beforeAll(async () => {
      // Two server connections for up to 20 client connections: statements prepared on one
      // client connection land on server connections other client connections also use.
      bouncer = await startPgBouncer(found.bin, 2);
      db = await createTestDatabase();
      dataSource = new DataSource({
        type: 'postgres',
        url: bouncer.through(db.url),
        migrations: [CreateIdempotencyRecords1732233600000],
        migrationsRun: true,
        extra: { max: 20 },
      });
      await dataSource.initialize();
    });

    afterAll(async () => {
      if (dataSource?.isInitialized) await dataSource.destroy();
      await db?.drop();
      await bouncer?.stop();
    });

    it('runs PgBouncer 1.18 or older, in transaction mode (the case under test)', async () => {
      expect(bouncer.version).toMatch(/^PgBouncer 1\.(1\d|20)\./);
      // Transaction pooling: two statements of one client connection may reach two backends.
      const runner = dataSource.createQueryRunner();
      await runner.connect();
      try {
        const pids = new Set<number>();
        // While other client connections keep server connections busy, the same client
        // connection's statements land on whichever server connection is free.
        for (let i = 0; i < 100 && pids.size < 2; i++) {
          const [[{ pid }]] = await Promise.all([
            runner.query('SELECT pg_backend_pid() AS pid'),
            ...Array.from({ length: 3 }, () => dataSource.query('SELECT pg_sleep(0.005)')),
          ]);
          pids.add(pid);
        }
        expect(pids.size).toBeGreaterThan(1);
      } finally {
        await runner.release();
      }
    });

    it('with named statements (the default), fails closed and names preparedStatements: false', async () => {
      const store = new TypeOrmIdempotencyStore(dataSource, TABLE, { timeoutMs: 5000 });
      const results = await Promise.allSettled(
        Array.from({ length: 40 }, () =>
          store.claim({
            scope: 's',
            key: randomUUID(),
            fingerprint: 'a'.repeat(64),
            method: 'POST',
            path: '/p',
            ownerToken: randomUUID(),
            lockTimeoutSeconds: 60,
            ttlSeconds: 60,
          }),
        ),
      );
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
      expect(errors.length).toBeGreaterThan(0);
      for (const error of errors) {
        expect(error).toBeInstanceOf(IdempotencyConfigurationError);
        expect(error.message).toMatch(/prepared statement "nest_idempotency_\w+" already exists/);
        expect(error.message).toContain('preparedStatements: false');
      }
    });

    describeIdempotencyStoreConformance(
      'the store, preparedStatements: false',
      async () => {
        await dataSource.query(`TRUNCATE ${TABLE}`);
        return {
          store: new TypeOrmIdempotencyStore(dataSource, TABLE, {
            timeoutMs: 5000,
            preparedStatements: false,
          }),
          advance: (seconds: number) => sleep(seconds * 1000),
          teardown: async () => undefined,
        };
      },
      { describe, it, expect },
    );

    describe.each(ADAPTERS)('an app (%s), preparedStatements: false', (adapter) => {
      let t: TestApp;
      const post = (path: string, key: string, body: object) =>
        request(t.server).post(path).set('Idempotency-Key', key).set('x-user', 'alice').send(body);

      beforeAll(async () => {
        t = await createTestApp(adapter, db, {
          databaseUrl: bouncer.through(db.url),
          module: { store: typeOrmStore({ preparedStatements: false }) },
        });
      });

      afterAll(async () => {
        await t?.close();
      });

      it('runs, stores and replays plain and transactional routes', async () => {
        for (const path of ['/orders', '/orders/tx']) {
          const key = `pgb-${adapter}-${path}-${randomUUID()}`;
          const first = await post(path, key, { amount: 7, note: key });
          expect(first.status).toBe(201);
          const replay = await post(path, key, { amount: 7, note: key });
          expect(replay.status).toBe(201);
          expect(replay.headers['idempotent-replayed']).toBe('true');
          expect(replay.text).toBe(first.text);
          expect(await orderCount(db, key)).toBe(1);
        }
      });

      it('runs a same-key storm of 100 once, with no 5xx', async () => {
        const key = `pgb-storm-${adapter}-${randomUUID()}`;
        const before = t.probe.ran('create');
        const answers = await Promise.all(
          Array.from({ length: 100 }, () => post('/orders', key, { amount: 9, note: key })),
        );
        const statuses = answers.map((r) => r.status);
        expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
        const executed = answers.filter(
          (r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined,
        );
        expect(executed).toHaveLength(1);
        expect(t.probe.ran('create') - before).toBe(1);
        expect(await orderCount(db, key)).toBe(1);
      });

      it('runs 60 different keys at once, each once', async () => {
        const keys = Array.from(
          { length: 60 },
          (_, i) => `pgb-many-${adapter}-${i}-${randomUUID()}`,
        );
        const answers = await Promise.all(
          keys.map((key) => post('/orders/tx', key, { amount: 3, note: key })),
        );
        expect(answers.map((r) => r.status)).toEqual(Array(60).fill(201));
        for (const key of keys) expect(await orderCount(db, key)).toBe(1);
      });
    });

    describe.each(ADAPTERS)('operations in phases (%s), preparedStatements: false', (adapter) => {
      let t: TestApp;
      let hooks: TransferHooks;
      const transfer = (path: string, key: string, body: object) =>
        request(t.server).post(path).set('Idempotency-Key', key).send(body);
      const ledger = (amount: number) =>
        db.query('SELECT id, status FROM ledger WHERE amount = $1', [amount]);

      beforeAll(async () => {
        t = await createTestApp(adapter, db, {
          ...TRANSFERS,
          databaseUrl: bouncer.through(db.url),
          module: { store: typeOrmStore({ preparedStatements: false }) },
          phases: { completer: false, jobs: false },
        });
        hooks = t.app.get(TransferHooks);
      });

      afterAll(async () => {
        await t?.close();
      });

      beforeEach(() => {
        hooks.before.clear();
        hooks.providerAnswers.length = 0;
      });

      // Amounts are unique per adapter, so each test finds its own ledger rows.
      const amount = (n: number) => (adapter === 'express' ? 10_000 : 20_000) + n;

      it('runs the steps once under a same-key storm of 30, replays, and delivers the staged job', async () => {
        const key = `pgb-phases-${adapter}-${randomUUID()}`;
        const body = { amount: amount(1), to: 'bob' };
        const answers = await Promise.all(
          Array.from({ length: 30 }, () => transfer('/transfers', key, body)),
        );
        expect(answers.map((r) => r.status).filter((s) => s !== 201 && s !== 409)).toEqual([]);
        const first = answers.find((r) => r.status === 201)!;
        for (const step of ['reserved', 'sent', 'settled']) expect(hooks.ran(key, step)).toBe(1);
        const replay = await transfer('/transfers', key, body);
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.text).toBe(first.text);
        const rows = await ledger(body.amount);
        expect(rows).toEqual([{ id: first.body.ledgerId, status: 'settled' }]);
        await t.app.get(IdempotencyJobs).drain();
        expect(
          await db.query('SELECT count(*)::int AS n FROM notifications WHERE ledger_id = $1', [
            first.body.ledgerId,
          ]),
        ).toEqual([{ n: 1 }]);
      });

      it('resumes at the recovery point after a retry-later', async () => {
        const key = `pgb-resume-${adapter}-${randomUUID()}`;
        const body = { amount: amount(2), to: 'carol' };
        hooks.providerAnswers.push('unavailable');
        const first = await transfer('/transfers', key, body);
        expect(first.status).toBe(503);
        expect(first.body.code).toBe('idempotency_retry_later');
        const retry = await transfer('/transfers', key, body);
        expect(retry.status).toBe(201);
        expect(hooks.ran(key, 'reserved')).toBe(1);
        expect(hooks.ran(key, 'sent')).toBe(2);
        expect(await ledger(body.amount)).toEqual([{ id: retry.body.ledgerId, status: 'settled' }]);
      });

      it('runs a SERIALIZABLE step again, alone, after a serialization failure (40001)', async () => {
        const key = `pgb-40001-${adapter}-${randomUUID()}`;
        const body = { amount: amount(3), to: 'dave' };
        const { contended, starts } = await conflictOnce(hooks, db);
        const res = await transfer('/transfers/serializable', key, body);
        expect(res.status).toBe(201);
        expect(starts()).toBe(2);
        expect(hooks.ran(key, 'reserved')).toBe(2);
        expect(await ledger(body.amount)).toEqual([{ id: res.body.ledgerId, status: 'settled' }]);
        expect(await db.query('SELECT amount FROM ledger WHERE id = $1', [contended])).toEqual([
          { amount: 1 },
        ]);
      });
    });
  });
}
