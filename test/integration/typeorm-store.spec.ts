/**
 * TypeOrmIdempotencyStore on real PostgreSQL: passes the shared conformance suite (short real
 * leases, database clock) on the driver's pool and through query runners, lets exactly one of 50
 * concurrent claims win (new key, lapsed lease, released key, expired record), commits or rolls
 * back a handler's own rows together with the completion, measures every lease and expiry from
 * the moment it is written, settles every call within its timeout when the database freezes or
 * the pool is exhausted (and never reuses the connection involved), purges a large expired
 * backlog in batches without touching live leases, and checks its table at bootstrap (default,
 * custom and schema-qualified names, and their migrations).
 *
 * The store is imported from its own files rather than the package root, so this suite depends
 * on the storage layer only.
 */
import { internalEnabled } from '../../lib/internals/internal-switch';
import { PG_PIPELINE } from '../../lib/internals/pg-pipeline';
import { randomUUID } from 'node:crypto';
import { DataSource, EventSubscriber } from 'typeorm';
import type { EntityManager, EntitySubscriberInterface, ReplicationMode } from 'typeorm';
import { IdempotencyConfigurationError } from '../../lib/config/idempotency-configuration.error';
import { IdempotencyCommitUnconfirmedError } from '../../lib/storage/commit-unconfirmed.error';
import type {
  ClaimRequest,
  StoredResponse,
} from '../../lib/interfaces/idempotency-record.interface';
import {
  CreateIdempotencyRecords1732233600000,
  createIdempotencyRecordsMigration,
} from '../../lib/storage/typeorm/create-idempotency-records.migration';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm/typeorm-idempotency.store';
import { IdempotencyStoreTimeoutError } from '../../lib/storage/typeorm/with-deadline';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { FrozenProxy } from '../fixtures/frozen-proxy';
import { LocalFirstIdempotencyStore } from '../../lib/storage/local-first-idempotency.store';
import { describeIdempotencyStoreConformance } from '../../lib/testing';

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

describeIdempotencyStoreConformance(
  'TypeOrmIdempotencyStore (PostgreSQL)',
  async () => {
    await db.query(`TRUNCATE ${TABLE}`);
    return {
      store: new TypeOrmIdempotencyStore(dataSource, TABLE),
      advance: (seconds: number) => sleep(seconds * 1000),
      teardown: async () => undefined,
    };
  },
  { describe, it, expect },
);

describeIdempotencyStoreConformance(
  'TypeOrmIdempotencyStore (PostgreSQL, through query runners: no pg pool on the driver)',
  async () => {
    await db.query(`TRUNCATE ${TABLE}`);
    return {
      store: new TypeOrmIdempotencyStore(withoutPoolAccess(dataSource), TABLE),
      advance: (seconds: number) => sleep(seconds * 1000),
      teardown: async () => undefined,
    };
  },
  { describe, it, expect },
);

describeIdempotencyStoreConformance(
  'TypeOrmIdempotencyStore (PostgreSQL, preparedStatements: false: unnamed statements)',
  async () => {
    await db.query(`TRUNCATE ${TABLE}`);
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

describe.each([
  ['prepares its statements by default', undefined, true],
  ['prepares nothing with preparedStatements: false', false, false],
] as const)('on one connection, the store %s', (_, preparedStatements, prepared) => {
  it('(pg_prepared_statements after a claim, a completion and a transaction)', async () => {
    const single = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
    await single.initialize();
    try {
      const store = new TypeOrmIdempotencyStore(single, TABLE, {
        timeoutMs: 5000,
        preparedStatements,
      });
      const request = claimRequest();
      expect((await store.claim(request)).outcome).toBe('claimed');
      expect(await store.complete(request, RESPONSE, 3600)).toBe(true);
      const transactional = claimRequest();
      await store.claim(transactional);
      const transaction = await store.beginTransaction();
      expect(await transaction.complete(transactional, RESPONSE, 3600)).toBe(true);
      await transaction.commit();
      // The pool's only connection: the one every statement above ran on.
      const [{ count }] = await single.query(
        "SELECT count(*)::int AS count FROM pg_prepared_statements WHERE name LIKE 'nest_idempotency_%'",
      );
      if (prepared) expect(count).toBeGreaterThan(0);
      else expect(count).toBe(0);
    } finally {
      await single.destroy();
    }
  });
});

describeIdempotencyStoreConformance(
  'LocalFirstIdempotencyStore over PostgreSQL',
  async () => {
    await db.query(`TRUNCATE ${TABLE}`);
    return {
      store: new LocalFirstIdempotencyStore(new TypeOrmIdempotencyStore(dataSource, TABLE), {
        maxEntries: 100,
        maxBytes: 1 << 20,
      }),
      advance: (seconds: number) => sleep(seconds * 1000),
      teardown: async () => undefined,
    };
  },
  { describe, it, expect },
);

/**
 * The DataSource as the store sees it on a TypeORM whose driver has no pg pool (`master`). The
 * pool is shadowed on a view of the driver that only the store gets: TypeORM's own query
 * runners need the real one to connect at all.
 */
function withoutPoolAccess(source: DataSource): DataSource {
  const driver = Object.create(source.driver, { master: { value: undefined } });
  return Object.create(source, {
    driver: { value: driver },
    createQueryRunner: {
      value: (mode?: ReplicationMode) => source.createQueryRunner(mode),
      writable: true, // for jest.spyOn
    },
  }) as DataSource;
}

/** The two ways the store reaches PostgreSQL; the bounded-wait tests run on both. */
const STATEMENT_PATHS = [
  ['the driver pool', (source: DataSource) => source],
  ['query runners', withoutPoolAccess],
] as const;

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
    // The winner's own lease is long: on a loaded machine the 50 claims can take longer than
    // 0.2 s, and a second takeover of a lapsed winner would be right, not a race lost.
    const requests = Array.from({ length: 50 }, () => ({
      ...first,
      ownerToken: randomUUID(),
      lockTimeoutSeconds: 60,
    }));
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
    // pg learns of each closed socket asynchronously: on a loaded machine a claim may still meet
    // a dead client within the first moments (and fail, never wrongly succeed). Recovery is the
    // claim: within 3 s one succeeds, and then ten at once all do.
    for (let waited = 0; waited < 3000; waited += 100) {
      await sleep(100);
      if (
        await store.claim(claimRequest()).then(
          () => true,
          () => false,
        )
      )
        break;
    }
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

  describe('a completion sent with its COMMIT (completeAndCommit)', () => {
    beforeAll(async () => {
      await db.query('CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, note text)');
    });
    beforeEach(async () => {
      await db.query('TRUNCATE orders');
    });

    interface WatchedClient {
      pipeline?: boolean;
      query: (...args: any[]) => unknown;
    }

    /**
     * What is sent on the pg client under a transaction's EntityManager, in order: each query's
     * first word, whether the completion had answered by then, and whether the client pipelined.
     */
    function watch(manager: EntityManager) {
      const client = (manager.queryRunner as unknown as { databaseConnection: WatchedClient })
        .databaseConnection;
      const sent: { word: string; completionAnswered: boolean; pipelined: boolean }[] = [];
      let completionAnswered = false;
      const query = client.query;
      client.query = function (this: unknown, config: any, ...rest: any[]) {
        const text: string = typeof config === 'string' ? config : config.text;
        sent.push({
          word: text.trim().split(/\s/)[0],
          completionAnswered,
          pipelined: client.pipeline === true,
        });
        const callback = rest[rest.length - 1];
        if (config?.name && typeof callback === 'function') {
          rest[rest.length - 1] = (...args: unknown[]) => {
            completionAnswered = true;
            callback(...args);
          };
        }
        return query.call(this, config, ...rest);
      };
      return { client, sent, restore: () => (client.query = query) };
    }

    /** The handler's own write, in the transaction. */
    async function insertOrder(tx: { manager: unknown }, key: string) {
      await (tx.manager as EntityManager).query('INSERT INTO orders (note) VALUES ($1)', [key]);
    }

    async function recordOf(key: string) {
      const [row] = await db.query(
        `SELECT status, response_status, owner_token FROM ${TABLE} WHERE idempotency_key = $1`,
        [key],
      );
      return row;
    }

    describe.each([
      ['', false],
      [' (a route that may wait: announced)', true],
    ])('%s', (_, announce) => {
      // Run with NEST_IDEMPOTENCY_PLAIN=pg-pipeline, the suite checks the plain path here.
      const pipelined = internalEnabled(PG_PIPELINE);
      it(`commits the business row and the completion together, the COMMIT sent ${pipelined ? 'before' : 'after'} the completion answered`, async () => {
        const req = claimRequest();
        await store.claim(req);
        const tx = await store.beginTransaction();
        const manager = tx.manager as EntityManager;
        await insertOrder(tx, req.key);
        const wire = watch(manager);
        try {
          expect(await tx.completeAndCommit!({ ...req, announce }, RESPONSE, 3600)).toBe(true);
        } finally {
          wire.restore();
        }
        expect(wire.sent.map((query) => query.word)).toEqual(['WITH', 'COMMIT']);
        expect(wire.sent[1]).toEqual({ word: 'COMMIT', completionAnswered: !pipelined, pipelined });
        // The connection goes back to the pool as it came: not pipelining, no transaction open.
        expect(wire.client.pipeline).toBe(false);
        expect(await db.query('SELECT note FROM orders')).toEqual([{ note: req.key }]);
        expect(await recordOf(req.key)).toMatchObject({
          status: 'completed',
          response_status: 201,
        });
      });

      it('when the lease was taken over, returns false and commits neither the business row nor the completion', async () => {
        const old = claimRequest({ lockTimeoutSeconds: 0.2 });
        await store.claim(old);
        const tx = await store.beginTransaction();
        await insertOrder(tx, old.key);
        await sleep(300);
        const current = { ...old, ownerToken: randomUUID(), lockTimeoutSeconds: 60 };
        expect(await store.claim(current)).toMatchObject({ outcome: 'claimed', attempt: 2 });
        expect(await tx.completeAndCommit!({ ...old, announce }, RESPONSE, 3600)).toBe(false);
        await expect(tx.rollback()).resolves.toBeUndefined();
        expect(await db.query('SELECT note FROM orders')).toEqual([]);
        expect(await recordOf(old.key)).toEqual({
          status: 'in_flight',
          response_status: null,
          owner_token: current.ownerToken,
        });
        // The new owner completes; the connection the failed one used serves again.
        expect(await store.complete(current, RESPONSE, 3600)).toBe(true);
        for (let i = 0; i < 30; i++) {
          const next = claimRequest();
          await store.claim(next);
          const again = await store.beginTransaction();
          expect(await again.completeAndCommit!(next, RESPONSE, 3600)).toBe(true);
        }
      });
    });

    it('without the runner’s pg client, sends them one after the other: committed when owned, rolled back when not', async () => {
      // Its assertions: committed when owned; when not, nothing committed, the business row too.
      await oneAfterTheOther(withoutPoolAccess(dataSource));
    });

    /** Sends a completion with its COMMIT on `source`, owned then lost; what the wire saw. */
    async function oneAfterTheOther(source: DataSource) {
      const sequential = new TypeOrmIdempotencyStore(source, TABLE);
      await sequential.verify();
      const owned = claimRequest();
      await sequential.claim(owned);
      const tx = await sequential.beginTransaction();
      await insertOrder(tx, owned.key);
      const wire = watch(tx.manager as EntityManager);
      try {
        expect(await tx.completeAndCommit!(owned, RESPONSE, 3600)).toBe(true);
      } finally {
        wire.restore();
      }
      expect((await recordOf(owned.key)).status).toBe('completed');

      const old = claimRequest({ lockTimeoutSeconds: 0.2 });
      await sequential.claim(old);
      const lost = await sequential.beginTransaction();
      await insertOrder(lost, old.key);
      await sleep(300);
      await sequential.claim({ ...old, ownerToken: randomUUID(), lockTimeoutSeconds: 60 });
      expect(await lost.completeAndCommit!(old, RESPONSE, 3600)).toBe(false);
      expect(await db.query('SELECT note FROM orders')).toEqual([{ note: owned.key }]);
      return wire.sent;
    }

    const answeredFirst = [
      { word: 'WITH', completionAnswered: false, pipelined: false },
      { word: 'COMMIT', completionAnswered: true, pipelined: false },
    ];

    it('sends them one after the other when a TypeORM subscriber listens to commits, which would hear of one that rolled back', async () => {
      const commits: string[] = [];
      @EventSubscriber()
      class CommitListener implements EntitySubscriberInterface {
        afterTransactionCommit(): void {
          commits.push('committed');
        }
      }
      const listened = new DataSource({
        type: 'postgres',
        url: db.url,
        subscribers: [CommitListener],
        extra: { max: 2 },
      });
      await listened.initialize();
      try {
        expect(await oneAfterTheOther(listened)).toEqual(answeredFirst);
        // Told of the one commit, not of the completion PostgreSQL would have rolled back.
        expect(commits).toEqual(['committed']);
      } finally {
        await listened.destroy();
      }
    });

    it('sends them one after the other with NEST_IDEMPOTENCY_PLAIN=pg-pipeline: the same outcome', async () => {
      process.env.NEST_IDEMPOTENCY_PLAIN = 'pg-pipeline';
      try {
        expect(await oneAfterTheOther(dataSource)).toEqual(answeredFirst);
      } finally {
        delete process.env.NEST_IDEMPOTENCY_PLAIN;
      }
    });
  });

  describe('every lease and expiry is measured from the moment it is written', () => {
    const TTL = 5;
    /** The database clock now, to the microsecond. */
    const dbNow = async () =>
      (await db.query<{ t: string }>('SELECT clock_timestamp()::text AS t'))[0].t;
    /**
     * How far `column` lies past `since + seconds`, in ms (negative when measured from earlier),
     * and how far it falls short of the database clock now plus `seconds`, in ms (negative when
     * measured from later than this read): both instants are the database's, so however slow the
     * host, a value written between them leaves both at 0 or more.
     */
    const margin = async (
      key: string,
      column: 'expires_at' | 'locked_until',
      since: string,
      seconds: number,
    ) => {
      const [row] = await db.query<{ ms: number; short: number }>(
        `SELECT EXTRACT(EPOCH FROM ${column} - ($2::timestamptz + $3::float8 * interval '1 second'))
                  ::float8 * 1000 AS ms,
                EXTRACT(EPOCH FROM (clock_timestamp() + $3::float8 * interval '1 second') - ${column})
                  ::float8 * 1000 AS short
           FROM ${TABLE} WHERE idempotency_key = $1`,
        [key, since, seconds],
      );
      return { ms: Number(row.ms), short: Number(row.short) };
    };
    /**
     * Writes the record's row in another transaction (as a transactional completion does), which
     * holds its row lock until `unlock()` commits.
     */
    const lockRow = async (key: string) => {
      const locker = dataSource.createQueryRunner();
      await locker.startTransaction();
      await locker.query(`UPDATE ${TABLE} SET updated_at = now() WHERE idempotency_key = $1`, [
        key,
      ]);
      return {
        unlock: async () => {
          await locker.commitTransaction();
          await locker.release();
        },
      };
    };

    it('complete on the pool: the replay window starts when the response is stored', async () => {
      const req = claimRequest();
      await store.claim(req);
      await sleep(300);
      const since = await dbNow();
      expect(await store.complete(req, RESPONSE, TTL)).toBe(true);
      const { ms, short } = await margin(req.key, 'expires_at', since, TTL);
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(short).toBeGreaterThanOrEqual(0);
    });

    it('complete in a transaction: the replay window starts at the completion, not at BEGIN', async () => {
      const req = claimRequest();
      await store.claim(req);
      const tx = await store.beginTransaction();
      await sleep(300); // the handler's work
      const since = await dbNow();
      expect(await tx.complete(req, RESPONSE, TTL)).toBe(true);
      await tx.commit();
      const { ms, short } = await margin(req.key, 'expires_at', since, TTL);
      expect(ms).toBeGreaterThanOrEqual(0);
      expect(short).toBeGreaterThanOrEqual(0);
    });

    it('renew moves the lease forward from each renewal', async () => {
      const req = claimRequest();
      await store.claim(req);
      const leases: number[] = [];
      for (let i = 0; i < 2; i++) {
        if (i > 0) await sleep(200);
        const since = await dbNow();
        expect(await store.renew(req, 60)).toBe(true);
        const { ms, short } = await margin(req.key, 'locked_until', since, 60);
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(short).toBeGreaterThanOrEqual(0);
        const [row] = await db.query(
          `SELECT locked_until FROM ${TABLE} WHERE idempotency_key = $1`,
          [req.key],
        );
        leases.push(row.locked_until.getTime());
      }
      expect(leases[1] - leases[0]).toBeGreaterThanOrEqual(190);
    });

    it.each(['complete', 'renew'] as const)(
      '%s that waited behind another writer of its row: measured from the write, not from the statement start',
      async (call) => {
        const req = claimRequest();
        await store.claim(req);
        const lock = await lockRow(req.key);
        const pending =
          call === 'complete' ? store.complete(req, RESPONSE, TTL) : store.renew(req, TTL);
        await sleep(300); // the statement is waiting for the lock
        const since = await dbNow();
        await lock.unlock();
        expect(await pending).toBe(true);
        const column = call === 'complete' ? 'expires_at' : 'locked_until';
        const { ms, short } = await margin(req.key, column, since, TTL);
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(short).toBeGreaterThanOrEqual(0);
      },
    );

    it('a claim that waited behind another writer of its row gets its whole lease and replay window', async () => {
      const first = claimRequest();
      await store.claim(first);
      expect(await store.release(first, 'retry')).toBe(true);
      const lock = await lockRow(first.key);
      const retry = { ...first, ownerToken: randomUUID(), lockTimeoutSeconds: TTL };
      const pending = store.claim(retry);
      await sleep(300); // the takeover is waiting for the lock
      const since = await dbNow();
      await lock.unlock();
      expect(await pending).toMatchObject({ outcome: 'claimed', attempt: 2 });
      const lease = await margin(first.key, 'locked_until', since, TTL);
      const window = await margin(first.key, 'expires_at', since, first.ttlSeconds);
      expect(lease.ms).toBeGreaterThanOrEqual(0);
      expect(window.ms).toBeGreaterThanOrEqual(0);
      expect(lease.short).toBeGreaterThanOrEqual(0);
    });
  });

  it('without a pg pool on the driver, runs claim, complete and a transaction through query runners', async () => {
    const view = withoutPoolAccess(dataSource);
    const createQueryRunner = jest.spyOn(view, 'createQueryRunner');
    const fallback = new TypeOrmIdempotencyStore(view, TABLE);
    await expect(fallback.verify()).resolves.toBeUndefined();

    const req = claimRequest();
    expect(await fallback.claim(req)).toMatchObject({ outcome: 'claimed', attempt: 1 });
    expect(await fallback.complete(req, RESPONSE, 3600)).toBe(true);
    const replay = await fallback.claim({ ...req, ownerToken: randomUUID() });
    if (replay.outcome !== 'completed') throw new Error(`expected a replay, got ${replay.outcome}`);
    expect(replay.response.status).toBe(201);
    expect(replay.response.headers).toEqual(RESPONSE.headers);
    expect(Buffer.compare(replay.response.body, RESPONSE.body)).toBe(0);

    const other = claimRequest();
    await fallback.claim(other);
    const tx = await fallback.beginTransaction();
    expect(await tx.complete(other, RESPONSE, 3600)).toBe(true);
    await tx.commit();
    const [row] = await db.query(`SELECT status FROM ${TABLE} WHERE idempotency_key = $1`, [
      other.key,
    ]);
    expect(row.status).toBe('completed');
    // One query runner each: verify and its transaction, claim (a fresh insert), complete, the
    // replay (the fresh insert finds the key, then the claim reads it), claim, beginTransaction.
    expect(createQueryRunner).toHaveBeenCalledTimes(8);
  });

  it('purges a backlog of 5000 expired rows in batches of 1000 and keeps live leases', async () => {
    await db.query(
      `INSERT INTO ${TABLE} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
         locked_until, expires_at, purge_after, method, path, response_status, response_body)
       SELECT 's', 'expired-' || g, gen_random_uuid(), repeat('a', 64),
              CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'released' END, NULL, NULL,
              now() - interval '1 minute', now() - interval '1 minute', 'POST', '/p', 201,
              '\\x00'::bytea
         FROM generate_series(1, 5000) g`,
    );
    await db.query(
      `INSERT INTO ${TABLE} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
         locked_until, expires_at, purge_after, method, path)
       SELECT 's', 'live-' || g, gen_random_uuid(), repeat('a', 64), 'in_flight', gen_random_uuid(),
              now() + interval '1 hour', now() - interval '1 minute', now() - interval '1 minute',
              'POST', '/p'
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
           locked_until, expires_at, purge_after, method, path)
         SELECT 's', $1 || g, gen_random_uuid(), repeat('a', 64),
                CASE WHEN $2::interval IS NULL THEN 'completed' ELSE 'in_flight' END,
                CASE WHEN $2::interval IS NULL THEN NULL ELSE gen_random_uuid() END,
                now() + $2::interval, now() - $3::interval - g * interval '1 ms',
                now() - $3::interval - g * interval '1 ms', 'POST', '/p'
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
         purge_after, method, path)
       SELECT 's', 'expired-' || g, gen_random_uuid(), repeat('a', 64), 'completed',
              now() - interval '1 minute', now() - interval '1 minute', 'POST', '/p'
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
        'custom_records_pkey',
        'custom_records_purge_after_idx',
        'custom_records_unfinished_idx',
      ]);
    });
  });
});

describe.each(STATEMENT_PATHS)('TypeOrmIdempotencyStore bounded waits, through %s', (_, view) => {
  const TIMEOUT_MS = 300;

  /** A DataSource of the test database behind a `FrozenProxy`, for one describe block. */
  function behindProxy(): { proxy: FrozenProxy; proxied: DataSource } {
    const rig = {} as { proxy: FrozenProxy; proxied: DataSource };
    beforeAll(async () => {
      rig.proxy = await FrozenProxy.start();
      const url = rig.proxy.urlFor(db.url);
      rig.proxied = new DataSource({ type: 'postgres', url, extra: { max: 10 } });
      await rig.proxied.initialize();
    });
    afterAll(async () => {
      // First the proxy: it ends the connections frozen for good, which the pool's shutdown
      // would otherwise wait for.
      await rig.proxy?.close();
      if (rig.proxied?.isInitialized) await rig.proxied.destroy();
    });
    return rig;
  }

  /** Runs a store call; how long it took to settle, and what it rejected with. */
  async function settle(call: () => Promise<unknown>) {
    const started = Date.now();
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    return { ms: Date.now() - started, error };
  }

  function expectTimeout(
    outcome: { ms: number; error: unknown },
    operation: string,
    waitingFor: string,
  ) {
    expect(outcome.error).toBeInstanceOf(IdempotencyStoreTimeoutError);
    expect((outcome.error as Error).message).toBe(
      `nest-idempotency: ${operation} timed out after ${TIMEOUT_MS} ms waiting for ${waitingFor}`,
    );
    expect(outcome.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(outcome.ms).toBeLessThan(2000);
  }

  beforeEach(async () => {
    await db.query(`TRUNCATE ${TABLE}`);
  });

  describe('a frozen database', () => {
    const through = behindProxy();

    it('every call rejects within the timeout, naming itself; after thawing, fresh connections serve the next calls', async () => {
      const store = new TypeOrmIdempotencyStore(view(through.proxied), TABLE, {
        timeoutMs: TIMEOUT_MS,
      });
      await store.verify();
      const tx = await store.beginTransaction(); // open across the freeze, on its own connection
      const held = claimRequest();
      expect((await store.claim(held)).outcome).toBe('claimed'); // leaves one idle connection

      through.proxy.freeze();
      const calls: Array<[string, () => Promise<unknown>, string]> = [
        // The idle connection is lent out and its statement never answered...
        ['claim', () => store.claim(claimRequest()), 'PostgreSQL to answer'],
        // ...then each call opens a new connection, which never gets past its startup.
        ['complete', () => store.complete(held, RESPONSE, 60), 'a pooled connection'],
        ['renew', () => store.renew(held, 60), 'a pooled connection'],
        ['release', () => store.release(held, 'retry'), 'a pooled connection'],
        ['purgeExpired', () => store.purgeExpired(100), 'a pooled connection'],
        ['beginTransaction', () => store.beginTransaction(), 'a pooled connection'],
        [
          'complete (in transaction)',
          () => tx.complete(held, RESPONSE, 60),
          'PostgreSQL to answer',
        ],
      ];
      for (const [operation, call, waitingFor] of calls) {
        expectTimeout(await settle(call), operation, waitingFor);
      }
      // The transaction's connection was closed with its statement: nothing is left to roll back,
      // so the rollback settles without waiting out a timeout (which takes TIMEOUT_MS at least).
      const rollback = await settle(() => tx.rollback());
      expect(rollback.error).toBeUndefined();
      expect(rollback.ms).toBeLessThan(TIMEOUT_MS - 20);
      await expect(tx.commit()).rejects.toThrow(/abandoned after a timeout/);

      through.proxy.thaw();
      // The pool lends out its most recently returned idle connection first: had a connection
      // whose statement timed out been given back, these calls would get it and hang.
      const claims = await Promise.all([1, 2, 3].map(() => store.claim(claimRequest())));
      expect(claims.map((c) => c.outcome)).toEqual(['claimed', 'claimed', 'claimed']);
      expect(await store.complete(held, RESPONSE, 60)).toBe(true);
      const after = await store.beginTransaction();
      await after.rollback();
    });
  });

  describe('a completion whose connection is cut before its answer', () => {
    const through = behindProxy();

    // Long enough for a fresh connection on a loaded machine: nothing here waits it out.
    const SENT_AGAIN_TIMEOUT_MS = 5000;

    it('is sent again and counts the completion that committed: true, the response stored', async () => {
      const store = new TypeOrmIdempotencyStore(view(through.proxied), TABLE, {
        timeoutMs: SENT_AGAIN_TIMEOUT_MS,
      });
      const req = claimRequest();
      await store.claim(req);
      through.proxy.cutAtNextAnswer();
      expect(await store.complete(req, RESPONSE, 3600)).toBe(true);
      const [row] = await db.query(`SELECT * FROM ${TABLE} WHERE idempotency_key = $1`, [req.key]);
      expect(row).toMatchObject({ status: 'completed', owner_token: req.ownerToken });
      expect(Buffer.compare(row.response_body, RESPONSE.body)).toBe(0);
      // The same owner's completion with another response is not counted as written.
      through.proxy.cutAtNextAnswer();
      const other = { ...RESPONSE, body: Buffer.from('{"other":true}') };
      expect(await store.complete(req, other, 3600)).toBe(false);
    });

    it('is sent again and reports a lease taken over meanwhile: false, nothing written', async () => {
      const store = new TypeOrmIdempotencyStore(view(through.proxied), TABLE, {
        timeoutMs: SENT_AGAIN_TIMEOUT_MS,
      });
      const old = claimRequest({ lockTimeoutSeconds: 0.2 });
      await store.claim(old);
      await sleep(300);
      const current = { ...old, ownerToken: randomUUID(), lockTimeoutSeconds: 60 };
      await store.claim(current);
      through.proxy.cutAtNextAnswer();
      expect(await store.complete(old, RESPONSE, 3600)).toBe(false);
      const [row] = await db.query(`SELECT * FROM ${TABLE} WHERE idempotency_key = $1`, [old.key]);
      expect(row).toMatchObject({ status: 'in_flight', owner_token: current.ownerToken });
    });
  });

  describe('an exhausted pool', () => {
    let single: DataSource;

    beforeAll(async () => {
      single = new DataSource({ type: 'postgres', url: db.url, extra: { max: 1 } });
      await single.initialize();
    });

    afterAll(async () => {
      if (single?.isInitialized) await single.destroy();
    });

    it('claim and beginTransaction wait for a connection no longer than the timeout; once one is free, they work', async () => {
      const store = new TypeOrmIdempotencyStore(view(single), TABLE, { timeoutMs: TIMEOUT_MS });
      const holder = single.createQueryRunner();
      await holder.connect();
      try {
        expectTimeout(
          await settle(() => store.claim(claimRequest())),
          'claim',
          'a pooled connection',
        );
        expectTimeout(
          await settle(() => store.beginTransaction()),
          'beginTransaction',
          'a pooled connection',
        );
      } finally {
        await holder.release();
      }
      // The freed connection reaches the two callers that gave up first; each hands it straight
      // back, or these calls would time out too.
      const req = claimRequest();
      expect(await store.claim(req)).toMatchObject({ outcome: 'claimed' });
      const tx = await store.beginTransaction();
      expect(await tx.complete(req, RESPONSE, 60)).toBe(true);
      await tx.commit();
    });
  });
});

/**
 * A COMMIT that returns with a WARNING, as one does after its wait for a synchronous standby was
 * cancelled (`test/e2e/failover.e2e-spec.ts` shows that case on a real standby). Here a deferred
 * trigger raises the WARNING at commit time, in German, as a server with `lc_messages = 'de_DE'`
 * would: the store matches the SQLSTATE, not the text. The commit stands; the store says so.
 */
describe('a commit that returns with a WARNING (SQLSTATE 01000)', () => {
  beforeAll(async () => {
    await db.query('CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, note text)');
    await db.query(`
      CREATE FUNCTION warn_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.idempotency_key LIKE 'warn-%' THEN
          RAISE WARNING 'Warten auf synchrone Replikation wurde abgebrochen' USING ERRCODE = '01000';
        ELSE
          RAISE NOTICE 'nur ein Hinweis';
        END IF;
        RETURN NULL;
      END $$`);
    await db.query(`
      CREATE CONSTRAINT TRIGGER warn_at_commit AFTER UPDATE ON ${TABLE}
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.status = 'completed')
        EXECUTE FUNCTION warn_at_commit()`);
  });
  afterAll(async () => {
    await db.query(`DROP TRIGGER warn_at_commit ON ${TABLE}`);
    await db.query('DROP FUNCTION warn_at_commit()');
  });

  const statusOf = async (key: string) =>
    (await db.query(`SELECT status FROM ${TABLE} WHERE idempotency_key = $1`, [key]))[0]?.status;

  describe.each(STATEMENT_PATHS)('on %s', (_path, sourceOf) => {
    let store: TypeOrmIdempotencyStore;
    beforeEach(() => {
      store = new TypeOrmIdempotencyStore(sourceOf(dataSource), TABLE);
    });

    it('a completion rejects with IdempotencyCommitUnconfirmedError, and the record stands completed', async () => {
      const req = claimRequest({ key: `warn-${randomUUID()}` });
      await store.claim(req);
      const completed = store.complete(req, RESPONSE, 3600);
      await expect(completed).rejects.toBeInstanceOf(IdempotencyCommitUnconfirmedError);
      await expect(completed).rejects.toMatchObject({ operation: 'complete' });
      expect(await statusOf(req.key)).toBe('completed');
    });

    it('a completion in a transaction, with or without its COMMIT sent along, rejects the same way; the handler’s row stands', async () => {
      for (const pipelined of [true, false]) {
        const req = claimRequest({ key: `warn-${randomUUID()}` });
        await store.claim(req);
        const tx = await store.beginTransaction();
        await (tx.manager as EntityManager).query('INSERT INTO orders (note) VALUES ($1)', [
          req.key,
        ]);
        const committed =
          pipelined && tx.completeAndCommit
            ? tx.completeAndCommit(req, RESPONSE, 3600)
            : tx.complete(req, RESPONSE, 3600).then(() => tx.commit());
        await expect(committed).rejects.toBeInstanceOf(IdempotencyCommitUnconfirmedError);
        expect(await statusOf(req.key)).toBe('completed');
        const orders = await db.query('SELECT count(*)::int AS n FROM orders WHERE note = $1', [
          req.key,
        ]);
        expect(orders).toEqual([{ n: 1 }]);
      }
    });

    it('a NOTICE is no warning: the completion resolves', async () => {
      const req = claimRequest({ key: `notice-${randomUUID()}` });
      await store.claim(req);
      expect(await store.complete(req, RESPONSE, 3600)).toBe(true);
      const tx = await store.beginTransaction();
      const other = claimRequest({ key: `notice-${randomUUID()}` });
      await store.claim(other);
      expect(await tx.complete(other, RESPONSE, 3600)).toBe(true);
      await tx.commit();
      expect(await statusOf(other.key)).toBe('completed');
    });
  });
});
