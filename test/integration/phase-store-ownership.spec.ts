/**
 * TypeOrmPhaseStore on real PostgreSQL: every write of an operation in phases is guarded by the
 * owner token. After a takeover (the first owner's lease lapsed and another claim won the key),
 * each call of the stale owner — `bind`, `beginStep`, `advance` (a foreign step's result),
 * `finish`, `abandon` — reports that it no longer owns the record and leaves the row exactly as it
 * was, byte for byte; the same call with the new owner's token goes through.
 */
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import type {
  ClaimRequest,
  IdempotencyRecordRef,
  StoredResponse,
} from '../../lib/interfaces/idempotency-record.interface';
import { CreateIdempotencyRecords1732233600000 } from '../../lib/storage/typeorm/create-idempotency-records.migration';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm/typeorm-idempotency.store';
import { TypeOrmPhaseStore } from '../../lib/storage/typeorm/typeorm-phase.store';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';

const TABLE = 'idempotency_records';
const OPERATION = 'transfers.create';
const INPUT = { amount: 5, to: 'acct_2' };
const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json; charset=utf-8' },
  body: Buffer.from('{"stale":true}'),
};

let db: TestDatabase;
let dataSource: DataSource;
let store: TypeOrmIdempotencyStore;
let phases: TypeOrmPhaseStore;

beforeAll(async () => {
  db = await createTestDatabase();
  dataSource = new DataSource({
    type: 'postgres',
    url: db.url,
    migrations: [CreateIdempotencyRecords1732233600000],
    migrationsRun: true,
    extra: { max: 5 },
  });
  await dataSource.initialize();
  store = new TypeOrmIdempotencyStore(dataSource, TABLE);
  phases = new TypeOrmPhaseStore(store, TABLE);
  await db.query("SET lock_timeout = '5s'");
});

afterAll(async () => {
  if (dataSource?.isInitialized) await dataSource.destroy();
  await db?.drop();
});

beforeEach(() => db.query(`TRUNCATE ${TABLE}`));

/** The whole row as text: every column, `bytea` as hex, timestamps to the microsecond. */
async function rowText(key: string): Promise<string> {
  const rows = await db.query<{ row: string }>(
    `SELECT row_to_json(r)::text AS row FROM ${TABLE} r WHERE idempotency_key = $1`,
    [key],
  );
  expect(rows).toHaveLength(1);
  return rows[0].row;
}

/**
 * A record whose operation the stale owner bound and moved to `reserved`; its lease then lapsed
 * and the new owner claimed the key and bound the operation again (a resume at `reserved`).
 */
async function takenOver(): Promise<{ stale: IdempotencyRecordRef; owner: IdempotencyRecordRef }> {
  const key = `key-${randomUUID()}`;
  const request = (ownerToken: string): ClaimRequest => ({
    scope: 'acct_1',
    key,
    fingerprint: 'f'.repeat(64),
    method: 'POST',
    path: '/transfers',
    ownerToken,
    lockTimeoutSeconds: 60,
    ttlSeconds: 3600,
  });
  const stale = { scope: 'acct_1', key, ownerToken: randomUUID() };
  expect((await store.claim(request(stale.ownerToken))).outcome).toBe('claimed');
  expect(await phases.bind(stale, OPERATION, INPUT, SETTINGS)).toMatchObject({
    recoveryPoint: 'started',
  });
  expect(await phases.advance(stale, 'started', 'reserved', { ledgerId: 1 })).toBe(true);
  // The stale owner's lease lapses (moved by SQL rather than waited for).
  await db.query(
    `UPDATE ${TABLE} SET locked_until = now() - interval '1 second' WHERE idempotency_key = $1`,
    [key],
  );
  const owner = { scope: 'acct_1', key, ownerToken: randomUUID() };
  expect((await store.claim(request(owner.ownerToken))).outcome).toBe('claimed');
  expect(await phases.bind(owner, OPERATION, INPUT, SETTINGS)).toMatchObject({
    recoveryPoint: 'reserved',
    resumed: true,
  });
  return { stale, owner };
}

/** The settings of the route that started the operation. */
const SETTINGS = { ttlSeconds: 3600, replayHeaders: ['location'] };

type Call = (ref: IdempotencyRecordRef) => Promise<unknown>;

/** Each guarded write, at the record's current recovery point, and how it reports not owning. */
const CALLS: [string, Call, unknown][] = [
  [
    'bind',
    (ref) =>
      phases.bind(ref, OPERATION, { amount: 999 }, { ttlSeconds: 1, replayHeaders: ['x-stale'] }),
    undefined,
  ],
  [
    'beginStep',
    async (ref) => {
      const step = await phases.beginStep(ref, 'reserved', 'READ COMMITTED');
      await step?.rollback();
      return step && 'locked';
    },
    undefined,
  ],
  ['advance', (ref) => phases.advance(ref, 'reserved', 'sent', { providerId: 'stale' }), false],
  [
    'finish',
    (ref) => phases.finish(ref, 'reserved', { providerId: 'stale' }, RESPONSE, 3600),
    false,
  ],
  ['abandon', (ref) => phases.abandon(ref), false],
];

describe('TypeOrmPhaseStore with a stale owner token', () => {
  it.each(CALLS)('%s changes nothing, byte for byte', async (_, call, notOwned) => {
    const { stale, owner } = await takenOver();
    const before = await rowText(stale.key);

    expect(await call(stale)).toBe(notOwned);
    expect(await rowText(stale.key)).toBe(before);

    // The control: with the owner's token, the same call goes through.
    expect(await call(owner)).not.toBe(notOwned);
  });
});
