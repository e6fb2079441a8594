/**
 * TypeOrmIdempotencyStore on real PostgreSQL: passes the shared conformance suite (short real
 * leases, database clock), lets exactly one of 50 concurrent claims win (new key, lapsed lease,
 * released key, expired record), commits or rolls back a handler's own rows together with the
 * completion, purges a large expired backlog in batches without touching live leases, and checks
 * its table at bootstrap (default, custom and schema-qualified names, and their migrations).
 */
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import type { EntityManager } from 'typeorm';
import {
  CreateIdempotencyRecords1732233600000,
  IdempotencyConfigurationError,
  TypeOrmIdempotencyStore,
  createIdempotencyRecordsMigration,
} from '../../lib';
import type { ClaimRequest, StoredResponse } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { describeStoreConformance } from '../shared/store-conformance';

const TABLE = 'idempotency_records';
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let db: TestDatabase;
let dataSource: DataSource;

beforeAll(async () => {
  db = await createTestDatabase();
  dataSource = new DataSource({
    type: 'postgres',
    url: db.url,
    migrations: [CreateIdempotencyRecords1732233600000],
    migrationsRun: true,
    extra: { max: 25 },
  });
  await dataSource.initialize();
  // A test that fails while a transaction holds a row lock must not hang the next TRUNCATE.
  await db.query("SET lock_timeout = '5s'");
});

afterAll(async () => {
  if (dataSource?.isInitialized) await dataSource.destroy();
  await db?.drop();
});

describeStoreConformance('TypeOrmIdempotencyStore (PostgreSQL)', async () => {
  await db.query(`TRUNCATE ${TABLE}`);
  return {
    store: new TypeOrmIdempotencyStore(dataSource, TABLE),
    advance: (seconds: number) => sleep(seconds * 1000),
    teardown: async () => undefined,
  };
});

function claimRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: 'acct_1',
    key: `key-${randomUUID()}`,
    fingerprint: 'a'.repeat(64),
    method: 'POST',
    path: '/payments',
    ownerToken: randomUUID(),
    lockTimeoutSeconds: 60,
    ttlSeconds: 3600,
    ...overrides,
  };
}

const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json', location: '/payments/1' },
  body: Buffer.from([0x7b, 0x7d, 0xff, 0x00]),
};

describe('TypeOrmIdempotencyStore on PostgreSQL', () => {
  let store: TypeOrmIdempotencyStore;

  beforeEach(async () => {
    await db.query(`TRUNCATE ${TABLE}`);
    store = new TypeOrmIdempotencyStore(dataSource, TABLE);
  });

  it('lets exactly one of 50 concurrent claims of a new key win', async () => {
    const base = claimRequest();
    const requests = Array.from({ length: 50 }, () => ({ ...base, ownerToken: randomUUID() }));
    const results = await Promise.all(requests.map((r) => store.claim(r)));

    const winners = results.flatMap((r, i) => (r.outcome === 'claimed' ? [requests[i]] : []));
    expect(winners).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'in_flight')).toHaveLength(49);
    expect(new Set(results.map((r) => r.recordId)).size).toBe(1);

    const rows = await db.query(
      `SELECT status, owner_token, attempts FROM ${TABLE} WHERE scope = $1 AND idempotency_key = $2`,
      [base.scope, base.key],
    );
    expect(rows).toEqual([
      { status: 'in_flight', owner_token: winners[0].ownerToken, attempts: 1 },
    ]);
  });

  it('with two payloads racing, one wins and every other caller is told by fingerprint', async () => {
    const base = claimRequest();
    const requests = Array.from({ length: 50 }, (_, i) => ({
      ...base,
      ownerToken: randomUUID(),
      fingerprint: (i % 2 === 0 ? 'a' : 'b').repeat(64),
    }));
    const results = await Promise.all(requests.map((r) => store.claim(r)));

    const winnerIndex = results.findIndex((r) => r.outcome === 'claimed');
    expect(results.filter((r) => r.outcome === 'claimed')).toHaveLength(1);
    const winnerFp = requests[winnerIndex].fingerprint;
    results.forEach((result, i) => {
      if (i === winnerIndex) return;
      expect(result.outcome).toBe(requests[i].fingerprint === winnerFp ? 'in_flight' : 'mismatch');
    });
    const rows = await db.query(`SELECT fingerprint FROM ${TABLE} WHERE idempotency_key = $1`, [
      base.key,
    ]);
    expect(rows).toEqual([{ fingerprint: winnerFp }]);
  });

  it('lets exactly one of 50 concurrent takeovers of a lapsed lease win', async () => {
    const first = claimRequest({ lockTimeoutSeconds: 0.2 });
    const original = await store.claim(first);
    await sleep(300);
    const requests = Array.from({ length: 50 }, () => ({ ...first, ownerToken: randomUUID() }));
    const results = await Promise.all(requests.map((r) => store.claim(r)));
    const claimed = results.filter((r) => r.outcome === 'claimed');
    expect(claimed).toEqual([{ outcome: 'claimed', recordId: original.recordId, attempt: 2 }]);
    expect(results.filter((r) => r.outcome === 'in_flight')).toHaveLength(49);
    const [row] = await db.query(
      `SELECT owner_token, attempts FROM ${TABLE} WHERE idempotency_key = $1`,
      [first.key],
    );
    const winner = requests[results.findIndex((r) => r.outcome === 'claimed')];
    expect(row).toEqual({ owner_token: winner.ownerToken, attempts: 2 });
  });

  it('lets exactly one of 50 concurrent retries of a released key win', async () => {
    const first = claimRequest();
    await store.claim(first);
    expect(await store.release(first, 'retry')).toBe(true);
    const requests = Array.from({ length: 50 }, () => ({ ...first, ownerToken: randomUUID() }));
    const results = await Promise.all(requests.map((r) => store.claim(r)));
    expect(results.filter((r) => r.outcome === 'claimed')).toEqual([
      expect.objectContaining({ attempt: 2 }),
    ]);
    expect(results.filter((r) => r.outcome === 'in_flight')).toHaveLength(49);
  });

  it('lets exactly one of 50 concurrent claims of an expired record win, as a new record', async () => {
    const first = claimRequest();
    const original = await store.claim(first);
    expect(await store.complete(first, RESPONSE, 0.2)).toBe(true);
    await sleep(300);
    const requests = Array.from({ length: 50 }, (_, i) => ({
      ...first,
      ownerToken: randomUUID(),
      fingerprint: (i % 2 === 0 ? 'c' : 'd').repeat(64),
    }));
    const results = await Promise.all(requests.map((r) => store.claim(r)));
    const winnerIndex = results.findIndex((r) => r.outcome === 'claimed');
    expect(results.filter((r) => r.outcome === 'claimed')).toHaveLength(1);
    expect(results[winnerIndex]).toMatchObject({ attempt: 1 });
    expect(results[winnerIndex].recordId).not.toBe(original.recordId);
    results.forEach((result, i) => {
      if (i === winnerIndex) return;
      const same = requests[i].fingerprint === requests[winnerIndex].fingerprint;
      expect(result.outcome).toBe(same ? 'in_flight' : 'mismatch');
    });
  });

  it('writes status, response and owner token on the row', async () => {
    const req = claimRequest();
    await store.claim(req);
    let [row] = await db.query(`SELECT * FROM ${TABLE} WHERE idempotency_key = $1`, [req.key]);
    expect(row).toMatchObject({
      status: 'in_flight',
      owner_token: req.ownerToken,
      method: 'POST',
      path: '/payments',
      response_status: null,
      response_body: null,
    });
    expect(row.locked_until.getTime()).toBeGreaterThan(Date.now() + 30_000);

    expect(await store.complete(req, RESPONSE, 3600)).toBe(true);
    [row] = await db.query(`SELECT * FROM ${TABLE} WHERE idempotency_key = $1`, [req.key]);
    expect(row).toMatchObject({ status: 'completed', response_status: 201, locked_until: null });
    expect(row.response_headers).toEqual(RESPONSE.headers);
    expect(Buffer.compare(row.response_body, RESPONSE.body)).toBe(0);
  });

  it('answers a replay, a mismatch and a live lease by reading: no row version or lock written, no wait on a lock', async () => {
    const done = claimRequest();
    await store.claim(done);
    await store.complete(done, RESPONSE, 3600);
    const busy = claimRequest();
    await store.claim(busy);
    const versions = () =>
      db.query(
        `SELECT idempotency_key, xmin::text, xmax::text FROM ${TABLE} ORDER BY idempotency_key`,
      );
    const before = await versions();
    const answers = async () => [
      (await store.claim({ ...done, ownerToken: randomUUID() })).outcome,
      (await store.claim({ ...done, ownerToken: randomUUID(), fingerprint: 'b'.repeat(64) }))
        .outcome,
      (await store.claim({ ...busy, ownerToken: randomUUID() })).outcome,
    ];
    expect(await answers()).toEqual(['completed', 'mismatch', 'in_flight']);
    expect(await versions()).toEqual(before);

    // Another transaction holds both rows locked: the answers still come at once.
    const locker = dataSource.createQueryRunner();
    await locker.startTransaction();
    try {
      await locker.query(`SELECT 1 FROM ${TABLE} FOR UPDATE`);
      const timeout = sleep(3000).then(() => 'blocked on the row lock');
      expect(await Promise.race([answers(), timeout])).toEqual([
        'completed',
        'mismatch',
        'in_flight',
      ]);
    } finally {
      await locker.rollbackTransaction();
      await locker.release();
    }
  });

  it('recovers when the server terminates its pooled connections: later claims succeed', async () => {
    const claimMany = () =>
      Promise.all(Array.from({ length: 10 }, () => store.claim(claimRequest())));
    await claimMany();
    const [{ n }] = await db.query(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    expect(n).toBeGreaterThan(0);
    await sleep(100);
    const outcomes = (await claimMany()).map((result) => result.outcome);
    expect(outcomes).toEqual(Array(10).fill('claimed'));
  });

  it('a takeover writes the new owner token on the row; the old one can no longer write', async () => {
    const old = claimRequest({ lockTimeoutSeconds: 0.2 });
    await store.claim(old);
    await sleep(300);
    const current = { ...old, ownerToken: randomUUID(), lockTimeoutSeconds: 60 };
    expect(await store.claim(current)).toMatchObject({ outcome: 'claimed', attempt: 2 });
    expect(await store.complete(old, RESPONSE, 3600)).toBe(false);
    const [row] = await db.query(`SELECT * FROM ${TABLE} WHERE idempotency_key = $1`, [old.key]);
    expect(row).toMatchObject({
      status: 'in_flight',
      owner_token: current.ownerToken,
      attempts: 2,
      response_status: null,
    });
  });

  describe('transactional completion with the handler’s own rows', () => {
    beforeAll(async () => {
      await db.query('CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, note text)');
    });
    beforeEach(async () => {
      await db.query('TRUNCATE orders');
    });

    async function runInTransaction(req: ClaimRequest, how: 'commit' | 'rollback') {
      await store.claim(req);
      const tx = await store.beginTransaction();
      let finished = false;
      try {
        const manager = tx.manager as EntityManager;
        await manager.query('INSERT INTO orders (note) VALUES ($1)', [req.key]);
        expect(await tx.complete(req, RESPONSE, 3600)).toBe(true);
        // Until the end of the transaction, nobody else sees either write.
        expect(await db.query('SELECT note FROM orders WHERE note = $1', [req.key])).toEqual([]);
        const [before] = await db.query(`SELECT status FROM ${TABLE} WHERE idempotency_key = $1`, [
          req.key,
        ]);
        expect(before.status).toBe('in_flight');
        finished = true;
        await (how === 'commit' ? tx.commit() : tx.rollback());
      } finally {
        if (!finished) await tx.rollback();
      }
    }

    it('commit makes the business row and the completion visible together', async () => {
      const req = claimRequest();
      await runInTransaction(req, 'commit');
      expect(await db.query('SELECT note FROM orders')).toEqual([{ note: req.key }]);
      const [row] = await db.query(
        `SELECT status, response_status FROM ${TABLE} WHERE idempotency_key = $1`,
        [req.key],
      );
      expect(row).toEqual({ status: 'completed', response_status: 201 });
    });

    it('rollback discards the business row and the completion together', async () => {
      const req = claimRequest();
      await runInTransaction(req, 'rollback');
      expect(await db.query('SELECT note FROM orders')).toEqual([]);
      const [row] = await db.query(
        `SELECT status, response_status, owner_token FROM ${TABLE} WHERE idempotency_key = $1`,
        [req.key],
      );
      expect(row).toEqual({
        status: 'in_flight',
        response_status: null,
        owner_token: req.ownerToken,
      });
    });

    it('returns the connection to the pool after commit and rollback', async () => {
      for (let i = 0; i < 30; i++) {
        await runInTransaction(claimRequest(), i % 2 === 0 ? 'commit' : 'rollback');
      }
      expect(await db.query('SELECT count(*)::int AS n FROM orders')).toEqual([{ n: 15 }]);
    });
  });

  it('purges a backlog of 5000 expired rows in batches of 1000 and keeps live leases', async () => {
    await db.query(
      `INSERT INTO ${TABLE} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
         locked_until, expires_at, method, path, response_status, response_body)
       SELECT 's', 'expired-' || g, gen_random_uuid(), repeat('a', 64),
              CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'released' END, NULL, NULL,
              now() - interval '1 minute', 'POST', '/p', 201, '\\x00'::bytea
         FROM generate_series(1, 5000) g`,
    );
    await db.query(
      `INSERT INTO ${TABLE} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
         locked_until, expires_at, method, path)
       SELECT 's', 'live-' || g, gen_random_uuid(), repeat('a', 64), 'in_flight', gen_random_uuid(),
              now() + interval '1 hour', now() - interval '1 minute', 'POST', '/p'
         FROM generate_series(1, 7) g`,
    );
    const batches: number[] = [];
    for (;;) {
      const n = await store.purgeExpired(1000);
      batches.push(n);
      if (n === 0) break;
    }
    expect(batches).toEqual([1000, 1000, 1000, 1000, 1000, 0]);
    const rows = await db.query(`SELECT idempotency_key FROM ${TABLE} ORDER BY 1`);
    expect(rows.map((r) => r.idempotency_key)).toEqual(
      Array.from({ length: 7 }, (_, i) => `live-${i + 1}`),
    );
  });

  it('deletes in a later pass what a pass went past: the oldest record, whose lease lapsed since', async () => {
    const insert = (key: string, expiredAgo: string, lease: string | null) =>
      db.query(
        `INSERT INTO ${TABLE} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
           locked_until, expires_at, method, path)
         SELECT 's', $1 || g, gen_random_uuid(), repeat('a', 64),
                CASE WHEN $2::interval IS NULL THEN 'completed' ELSE 'in_flight' END,
                CASE WHEN $2::interval IS NULL THEN NULL ELSE gen_random_uuid() END,
                now() + $2::interval, now() - $3::interval - g * interval '1 ms', 'POST', '/p'
           FROM generate_series(1, $4::int) g`,
        [key, lease, expiredAgo, key === 'held-' ? 1 : 2500],
      );
    await insert('held-', '2 hours', '1 hour'); // the oldest expiry, but a live lease
    await insert('old-', '1 hour', null);
    const pass = async () => {
      const batches: number[] = [];
      for (;;) {
        const n = await store.purgeExpired(1000);
        batches.push(n);
        if (n < 1000) return batches;
      }
    };
    expect(await pass()).toEqual([1000, 1000, 500]);
    await db.query(`UPDATE ${TABLE} SET locked_until = now() - interval '1 second'`);
    expect(await pass()).toEqual([1]);
    expect(await db.query(`SELECT count(*)::int AS n FROM ${TABLE}`)).toEqual([{ n: 0 }]);
  });

  it('two purgers running at once delete each expired row once', async () => {
    await db.query(
      `INSERT INTO ${TABLE} (scope, idempotency_key, record_id, fingerprint, status, expires_at,
         method, path)
       SELECT 's', 'expired-' || g, gen_random_uuid(), repeat('a', 64), 'completed',
              now() - interval '1 minute', 'POST', '/p'
         FROM generate_series(1, 3000) g`,
    );
    const drain = async () => {
      let total = 0;
      for (;;) {
        const n = await store.purgeExpired(500);
        if (n === 0) return total;
        total += n;
      }
    };
    const [a, b] = await Promise.all([drain(), drain()]);
    expect(a + b).toBe(3000);
    expect(await db.query(`SELECT count(*)::int AS n FROM ${TABLE}`)).toEqual([{ n: 0 }]);
  });

  describe('verify()', () => {
    it('passes when the table exists', async () => {
      await expect(store.verify()).resolves.toBeUndefined();
    });

    it('rejects a missing table with a message naming the migration', async () => {
      const missing = new TypeOrmIdempotencyStore(dataSource, 'no_such_records');
      const error = await missing.verify().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(IdempotencyConfigurationError);
      expect((error as Error).message).toMatch(/no_such_records/);
      expect((error as Error).message).toMatch(/CreateIdempotencyRecords1732233600000/);
      expect((error as Error).message).toMatch(/createIdempotencyRecordsMigration/);
    });

    it('rejects a DataSource that is not PostgreSQL', async () => {
      const mysql = { options: { type: 'mysql' } } as unknown as DataSource;
      await expect(new TypeOrmIdempotencyStore(mysql, TABLE).verify()).rejects.toThrow(
        /PostgreSQL.*"mysql"/,
      );
    });
  });

  describe('custom tableName', () => {
    let customDb: TestDatabase;
    let customSource: DataSource;

    beforeAll(async () => {
      customDb = await createTestDatabase();
      customSource = new DataSource({
        type: 'postgres',
        url: customDb.url,
        migrations: [createIdempotencyRecordsMigration('custom_records')],
        migrationsRun: true,
      });
      await customSource.initialize();
    });

    afterAll(async () => {
      if (customSource?.isInitialized) await customSource.destroy();
      await customDb?.drop();
    });

    it('creates a schema-qualified table', async () => {
      await customDb.query('CREATE SCHEMA IF NOT EXISTS billing');
      const billing = new DataSource({
        type: 'postgres',
        url: customDb.url,
        migrations: [createIdempotencyRecordsMigration('billing.idempotency_records')],
        migrationsTableName: 'billing_migrations',
        migrationsRun: true,
      });
      await billing.initialize();
      try {
        const scoped = new TypeOrmIdempotencyStore(billing, 'billing.idempotency_records');
        await expect(scoped.verify()).resolves.toBeUndefined();
        const req = claimRequest();
        expect((await scoped.claim(req)).outcome).toBe('claimed');
        expect(
          await customDb.query('SELECT idempotency_key FROM billing.idempotency_records'),
        ).toEqual([{ idempotency_key: req.key }]);
      } finally {
        await billing.destroy();
      }
    });

    it('creates a custom table in a database where the default migration already ran', async () => {
      // The shared database already recorded CreateIdempotencyRecords1732233600000 (default table).
      // Following verify()'s advice — add createIdempotencyRecordsMigration(tableName) and run
      // it — must create the custom table too.
      const second = new DataSource({
        type: 'postgres',
        url: db.url,
        migrations: [createIdempotencyRecordsMigration('second_records')],
        migrationsRun: true,
      });
      await second.initialize();
      try {
        await expect(
          new TypeOrmIdempotencyStore(second, 'second_records').verify(),
        ).resolves.toBeUndefined();
      } finally {
        await second.destroy();
      }
    });

    it('creates the custom table and stores records in it', async () => {
      const custom = new TypeOrmIdempotencyStore(customSource, 'custom_records');
      await expect(custom.verify()).resolves.toBeUndefined();
      await expect(new TypeOrmIdempotencyStore(customSource, TABLE).verify()).rejects.toThrow(
        IdempotencyConfigurationError,
      );

      const req = claimRequest();
      expect((await custom.claim(req)).outcome).toBe('claimed');
      expect(await custom.complete(req, RESPONSE, 3600)).toBe(true);
      const replay = await custom.claim({ ...req, ownerToken: randomUUID() });
      expect(replay.outcome).toBe('completed');

      const rows = await customDb.query(
        'SELECT idempotency_key, status, response_status FROM custom_records',
      );
      expect(rows).toEqual([
        { idempotency_key: req.key, status: 'completed', response_status: 201 },
      ]);
      const indexes = await customDb.query(
        `SELECT indexname FROM pg_indexes WHERE tablename = 'custom_records' ORDER BY 1`,
      );
      expect(indexes.map((i) => i.indexname)).toEqual([
        'custom_records_expires_at_idx',
        'custom_records_pkey',
      ]);
    });
  });
});
