/**
 * A rolling upgrade: instances of the previous release (its code taken from git history, see
 * test/fixtures/previous-release.ts) keep serving while this release's migrations run and this
 * release's instances start beside them. Every migration of a release is an expand step, so
 * the previous release must keep working on the migrated table: it claims new keys (before,
 * `purge_after NOT NULL` failed its insert and it answered 503 on every new key), replays, and
 * its records are replayed by this release and purged by this release once expired (its
 * statements never write `purge_after`: triggers write it for them), and no earlier.
 */
import request from 'supertest';
import { DataSource } from 'typeorm';
import {
  AddOperationSettingsToIdempotencyRecords1764288000000,
  AddPhasesToIdempotencyRecords1764028800000,
  AddPurgeAfterToIdempotencyRecords1764201600000,
  CreateIdempotencyRecords1732233600000,
} from '../../lib/storage/typeorm';
import { Idempotent, IdempotencyPurgeService } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import {
  extractPreviousRelease,
  removeExtractedReleases,
  spawnPreviousRelease,
} from '../fixtures/previous-release';
import type { PreviousReleaseApp } from '../fixtures/previous-release';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { upgradeOrdersController } from '../fixtures/upgrade-orders.controller';
import { waitFor } from '../fixtures/wait-for';

jest.setTimeout(120_000);

/** This release's migrations, as an application lists them: run while the old instances serve. */
async function runCurrentMigrations(url: string): Promise<void> {
  const dataSource = new DataSource({
    type: 'postgres',
    url,
    migrations: [
      CreateIdempotencyRecords1732233600000,
      AddPhasesToIdempotencyRecords1764028800000,
      AddPurgeAfterToIdempotencyRecords1764201600000,
      AddOperationSettingsToIdempotencyRecords1764288000000,
    ],
  });
  await dataSource.initialize();
  try {
    await dataSource.runMigrations();
  } finally {
    await dataSource.destroy();
  }
}

afterAll(() => removeExtractedReleases());

describe.each(ADAPTERS)('rolling upgrade from the previous release on %s', (adapter) => {
  let db: TestDatabase;
  let previous: PreviousReleaseApp | undefined;
  let current: TestApp | undefined;

  const order = (target: string, key: string, amount: number, path = '/upgrade-orders') =>
    request(target).post(path).set('Idempotency-Key', key).send({ amount });
  const row = async (key: string) =>
    (
      await db.query(
        // What the purge relies on: a lower bound of the expiry, of the record now in the row.
        `SELECT purge_after IS NOT NULL AS filled, purge_after <= expires_at AS bound,
                purge_after > created_at AS current
           FROM idempotency_records WHERE idempotency_key = $1`,
        [key],
      )
    )[0];

  beforeAll(async () => {
    db = await createTestDatabase();
    // The previous release's deployment: its own create migration, its instance serving.
    previous = await spawnPreviousRelease(extractPreviousRelease(), db.url, adapter);
    const before = await order(previous.url, 'before-upgrade', 1);
    expect(before.status).toBe(201);
    // This release's migrations run while the previous release serves.
    await runCurrentMigrations(db.url);
    current = await createTestApp(adapter, db, {
      controllers: [upgradeOrdersController(Idempotent, 'current')],
    });
  });

  afterAll(async () => {
    await previous?.stop();
    await current?.close();
    await db?.drop();
  });

  it('the previous release claims a new key on the migrated table (201), then replays it', async () => {
    const first = await order(previous!.url, 'new-key', 7);
    expect({ status: first.status, body: first.body }).toEqual({
      status: 201,
      body: { release: 'previous', run: 2, amount: 7 },
    });
    const again = await order(previous!.url, 'new-key', 7);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await request(previous!.url).get('/upgrade-orders/runs')).body).toEqual({ runs: 2 });
    // Its insert never names purge_after: the trigger wrote the claim's expiry there.
    expect(await row('new-key')).toEqual({ filled: true, bound: true, current: true });
  });

  it('each release replays what the other stored', async () => {
    const fromPrevious = await order(current!.server, 'new-key', 7);
    expect(fromPrevious.status).toBe(201);
    expect(fromPrevious.headers['idempotent-replayed']).toBe('true');
    expect(fromPrevious.body).toEqual({ release: 'previous', run: 2, amount: 7 });
    const madeBefore = await order(current!.server, 'before-upgrade', 1);
    expect(madeBefore.headers['idempotent-replayed']).toBe('true');
    expect(madeBefore.body).toEqual({ release: 'previous', run: 1, amount: 1 });

    const fromCurrent = await order(current!.server, 'current-key', 3);
    expect({ status: fromCurrent.status, body: fromCurrent.body }).toEqual({
      status: 201,
      body: { release: 'current', run: 1, amount: 3 },
    });
    const replayed = await order(previous!.url, 'current-key', 3);
    expect(replayed.status).toBe(201);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body).toEqual(fromCurrent.body);
    expect((await request(previous!.url).get('/upgrade-orders/runs')).body).toEqual({ runs: 2 });
  });

  it("this release's purge deletes the previous release's records once expired, and only those", async () => {
    const purge = current!.app.get(IdempotencyPurgeService);
    const present = async (key: string) =>
      (await db.query('SELECT 1 FROM idempotency_records WHERE idempotency_key = $1', [key]))
        .length === 1;

    const short = await order(previous!.url, 'short-lived', 5, '/upgrade-orders/short');
    expect(short.status).toBe(201);
    await waitFor(async () => {
      await purge.purgeExpired();
      return !(await present('short-lived'));
    }, 15_000);
    // Records that have not expired stay, whichever release wrote them.
    for (const key of ['before-upgrade', 'new-key', 'current-key']) {
      expect({ key, present: await present(key) }).toEqual({ key, present: true });
    }
  });

  it('a re-claim of an expired record by the previous release keeps purge_after at its new expiry', async () => {
    const purge = current!.app.get(IdempotencyPurgeService);
    const first = await order(previous!.url, 'reclaimed', 9, '/upgrade-orders/short');
    expect(first.status).toBe(201);
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT 1 FROM idempotency_records
              WHERE idempotency_key = 'reclaimed' AND expires_at <= clock_timestamp()`,
          )
        ).length === 1,
      15_000,
    );
    // Expired: the previous release runs the handler again on the same row. Its statement sets
    // expires_at, created_at and a new record_id but not purge_after, which would be left at
    // the first record's expiry (before the new record was created); the trigger moves it.
    const second = await order(previous!.url, 'reclaimed', 9, '/upgrade-orders/short');
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(second.body.run).toBe(first.body.run + 1);
    expect(await row('reclaimed')).toEqual({ filled: true, bound: true, current: true });
    await waitFor(async () => {
      await purge.purgeExpired();
      return (
        (await db.query(`SELECT 1 FROM idempotency_records WHERE idempotency_key = 'reclaimed'`))
          .length === 0
      );
    }, 15_000);
  });
});
