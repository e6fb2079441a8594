/**
 * Encryption at rest on real PostgreSQL: the local-first store sealing at its edge to the TypeORM
 * store (with its replay cache off, so every claim reads the row, and on) passes the store
 * conformance suite; the row holds no plaintext of a sealed
 * response (plain or transactional completion) nor of an operation's input, state or final
 * response, while the status and the operation's columns stay readable; the operations port opens
 * what it sealed, reads rows stored in the clear only while `plaintextUntil` lets it, and refuses
 * (500 `idempotency_record_unreadable`) input or state whose key is gone — leaving no transaction
 * open.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { IdempotencyProblemException } from '../../lib/errors/idempotency-problem.exception';
import type {
  ClaimRequest,
  IdempotencyRecordRef,
  StoredResponse,
} from '../../lib/interfaces/idempotency-record.interface';
import type { OperationRecordStore } from '../../lib/phases/operation-record.store';
import type { IdempotencyStore } from '../../lib/storage/idempotency.store';
import { LocalFirstIdempotencyStore } from '../../lib/storage/local-first-idempotency.store';
import { resolveEncryptionOptions } from '../../lib/config/encryption-options';
import { RecordSealer, SEALED_MARKER } from '../../lib/storage/sealed/record-sealer';
import { CreateIdempotencyRecords1732233600000 } from '../../lib/storage/typeorm/create-idempotency-records.migration';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm/typeorm-idempotency.store';
import { describeIdempotencyStoreConformance } from '../../lib/testing';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';

const TABLE = 'idempotency_records';
const K1 = { id: 'k1', secret: randomBytes(32) };
const K2 = { id: 'k2', secret: randomBytes(32) };
const SECRET_TEXT = 'card-4242424242424242';
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
    extra: { max: 10 },
  });
  await dataSource.initialize();
});

afterAll(async () => {
  if (dataSource?.isInitialized) await dataSource.destroy();
  await db?.drop();
});

function sealing(...keys: Array<{ id: string; secret: Buffer }>): IdempotencyStore {
  return sealingWith(keys.length ? { keys } : null);
}

/** An instance's store with the given `encryption`, its replay cache off: claims read the row. */
function sealingWith(
  encryption: Parameters<typeof resolveEncryptionOptions>[0],
  maxEntries = 0,
): IdempotencyStore {
  const sealer = new RecordSealer(resolveEncryptionOptions(encryption));
  const typeorm = new TypeOrmIdempotencyStore(dataSource, TABLE);
  return new LocalFirstIdempotencyStore(typeorm, { maxEntries, maxBytes: 1 << 20, sealer });
}

describeIdempotencyStoreConformance(
  'LocalFirstIdempotencyStore sealing over PostgreSQL, replay cache off',
  async () => {
    await db.query(`TRUNCATE ${TABLE}`);
    return { store: sealing(K1, K2), advance: (seconds: number) => sleep(seconds * 1000) };
  },
  { describe, it, expect },
);

describeIdempotencyStoreConformance(
  'LocalFirstIdempotencyStore sealing over PostgreSQL, replay cache on',
  async () => {
    await db.query(`TRUNCATE ${TABLE}`);
    return {
      store: sealingWith({ keys: [K1] }, 100),
      advance: (seconds: number) => sleep(seconds * 1000),
    };
  },
  { describe, it, expect },
);

const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json', location: `/cards/${SECRET_TEXT}` },
  body: Buffer.from(JSON.stringify({ number: SECRET_TEXT })),
};

function claimRequest(): ClaimRequest {
  return {
    scope: 'acct_1',
    key: `key-${randomUUID()}`,
    fingerprint: 'f'.repeat(64),
    method: 'POST',
    path: '/cards',
    ownerToken: randomUUID(),
    lockTimeoutSeconds: 60,
    ttlSeconds: 3600,
  };
}

const refOf = (request: ClaimRequest): IdempotencyRecordRef => ({
  scope: request.scope,
  key: request.key,
  ownerToken: request.ownerToken,
});

/** The whole row as text (bytea as hex, and as the bytes themselves, decoded as Latin-1). */
async function rowText(key: string): Promise<string> {
  const [row] = await db.query<{ row: string; body: Buffer | null }>(
    `SELECT row_to_json(r)::text AS row, r.response_body AS body FROM ${TABLE} r
      WHERE idempotency_key = $1`,
    [key],
  );
  return `${row.row}\n${row.body?.toString('latin1') ?? ''}`;
}

async function unreadable(promise: Promise<unknown>): Promise<IdempotencyProblemException> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(IdempotencyProblemException);
  expect((error as IdempotencyProblemException).code).toBe('idempotency_record_unreadable');
  return error as IdempotencyProblemException;
}

describe('sealed rows', () => {
  beforeEach(() => jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined));
  afterEach(() => jest.restoreAllMocks());

  it.each([
    ['complete()', 'none'],
    ['a transaction', 'complete, then commit'],
    ['a transaction, with its COMMIT', 'completeAndCommit'],
  ] as const)(
    'a response completed by %s is sealed in its row; the status stays clear',
    async (_, tx) => {
      const store = sealing(K1);
      const request = claimRequest();
      await store.claim(request);
      if (tx === 'none') {
        expect(await store.complete(refOf(request), RESPONSE, 3600)).toBe(true);
      } else {
        const transaction = await store.beginTransaction();
        if (tx === 'completeAndCommit') {
          expect(await transaction.completeAndCommit!(refOf(request), RESPONSE, 3600)).toBe(true);
        } else {
          expect(await transaction.complete(refOf(request), RESPONSE, 3600)).toBe(true);
          await transaction.commit();
        }
      }
      const text = await rowText(request.key);
      expect(text).toContain(request.key);
      expect(text).not.toContain(SECRET_TEXT);
      expect(text).not.toContain('/cards/');
      const [row] = await db.query(
        `SELECT status, response_status, response_headers FROM ${TABLE} WHERE idempotency_key = $1`,
        [request.key],
      );
      expect(row).toEqual({
        status: 'completed',
        response_status: 201,
        response_headers: { [SEALED_MARKER]: 'k1' },
      });
      const replay = await store.claim({ ...request, ownerToken: randomUUID() });
      expect(replay.outcome === 'completed' && replay.response).toEqual(RESPONSE);
    },
  );
});

describe('the operations port', () => {
  beforeEach(() => jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined));
  afterEach(() => jest.restoreAllMocks());

  const SETTINGS = { ttlSeconds: 3600, replayHeaders: ['location'] } as any;
  const INPUT = { amount: 5, card: SECRET_TEXT };

  const operationsOf = (store: IdempotencyStore): OperationRecordStore =>
    store.capabilities().operations!;

  /** A record whose operation is bound and moved to `reserved` with a carried state. */
  async function reserved(store: IdempotencyStore) {
    const request = claimRequest();
    await store.claim(request);
    const ref = refOf(request);
    const operations = operationsOf(store);
    const bound = await operations.bind(ref, 'cards.create', INPUT, SETTINGS);
    expect(bound).toMatchObject({ recoveryPoint: 'started', input: INPUT, state: {} });
    expect(await operations.advance(ref, 'started', 'reserved', { token: SECRET_TEXT })).toBe(true);
    return { request, ref };
  }

  it('seals input, state and the final response; opens them for the next run', async () => {
    const store = sealing(K1);
    const { request, ref } = await reserved(store);
    const [row] = await db.query(
      `SELECT operation, recovery_point, operation_input, operation_state FROM ${TABLE}
        WHERE idempotency_key = $1`,
      [request.key],
    );
    expect(row.operation).toBe('cards.create');
    expect(row.recovery_point).toBe('reserved');
    for (const sealed of [row.operation_input, row.operation_state]) {
      expect(Object.keys(sealed).sort()).toEqual(['sealed', SEALED_MARKER]);
      expect(sealed[SEALED_MARKER]).toBe('k1');
    }
    expect(await rowText(request.key)).not.toContain(SECRET_TEXT);

    // A resume (a retry on a rotated instance: k2 seals, k1 still opens) reads both in the clear.
    expect(await store.release(ref, 'retry')).toBe(true);
    const rotated = sealing(K2, K1);
    const retry = { ...request, ownerToken: randomUUID() };
    expect((await rotated.claim(retry)).outcome).toBe('claimed');
    const operations = operationsOf(rotated);
    const again = await operations.bind(refOf(retry), 'cards.create', { other: true }, SETTINGS);
    expect(again).toMatchObject({ resumed: true, input: INPUT, state: { token: SECRET_TEXT } });
    const step = await operations.beginStep(refOf(retry), 'reserved', 'READ COMMITTED');
    expect(step!.state).toEqual({ token: SECRET_TEXT });
    expect(
      await operations.finish(
        refOf(retry),
        'reserved',
        { token: SECRET_TEXT, done: 1 },
        RESPONSE,
        3600,
        step,
      ),
    ).toBe(true);
    await step!.commit();
    const text = await rowText(request.key);
    expect(text).not.toContain(SECRET_TEXT);
    expect(text).toContain('"k2"');
    const replay = await sealing(K1, K2).claim({ ...request, ownerToken: randomUUID() });
    expect(replay.outcome === 'completed' && replay.response).toEqual(RESPONSE);
  });

  /** bind() and beginStep() both refuse the record, and leave no transaction open. */
  async function expectRefusedWithNoTransactionOpen(
    operations: OperationRecordStore,
    ref: IdempotencyRecordRef,
  ): Promise<void> {
    await unreadable(operations.bind(ref, 'cards.create', INPUT, SETTINGS));
    await unreadable(operations.beginStep(ref, 'reserved', 'READ COMMITTED'));
    const [{ open }] = await db.query(
      `SELECT count(*)::int AS open FROM pg_stat_activity
        WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
    );
    expect(open).toBe(0);
  }

  it('reads input and state stored in the clear (before encryption) only until plaintextUntil', async () => {
    const plain = sealing();
    const { ref } = await reserved(plain);
    const until = new Date(Date.now() + 60_000);
    const operations = operationsOf(sealingWith({ keys: [K1], plaintextUntil: until }));
    expect(await operations.bind(ref, 'cards.create', INPUT, SETTINGS)).toMatchObject({
      input: INPUT,
      state: { token: SECRET_TEXT },
    });
    const step = await operations.beginStep(ref, 'reserved', 'READ COMMITTED');
    expect(step!.state).toEqual({ token: SECRET_TEXT });
    await step!.rollback();
    // Without the window, the same clear row is refused, with no transaction left open.
    const strict = operationsOf(sealing(K1));
    await expectRefusedWithNoTransactionOpen(strict, ref);
  });

  it('refuses input and state whose key is gone, with no transaction left open', async () => {
    const { ref } = await reserved(sealing(K1));
    const operations = operationsOf(sealing(K2));
    await expectRefusedWithNoTransactionOpen(operations, ref);
    // The row is left as it was: with the key back, the operation carries on.
    const step = await operationsOf(sealing(K2, K1)).beginStep(ref, 'reserved', 'READ COMMITTED');
    expect(step!.state).toEqual({ token: SECRET_TEXT });
    await step!.rollback();
  });

  it('lists abandoned operations opened, and seals the response an operator resolves one with', async () => {
    const store = sealing(K1);
    const { request, ref } = await reserved(store);
    const operations = operationsOf(store);
    expect(await operations.abandon(ref)).toBe(true);
    const listed = (await operations.listAbandoned(100)).find((row) => row.key === request.key);
    expect(listed).toMatchObject({ input: INPUT, state: { token: SECRET_TEXT } });
    await unreadable(operationsOf(sealing(K2)).listAbandoned(100));
    const record = await operations.abandonedRecord(request.scope, request.key);
    const completion = { record: record!, response: RESPONSE, ttlSeconds: 3600 };
    expect(await operations.resolveAbandoned(request.scope, request.key, completion)).toBe(true);
    expect(await rowText(request.key)).not.toContain(SECRET_TEXT);
    const replay = await store.claim({ ...request, ownerToken: randomUUID() });
    expect(replay.outcome === 'completed' && replay.response).toEqual(RESPONSE);
  });
});
