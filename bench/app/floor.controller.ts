import { Body, ConflictException, Controller, Headers, HttpCode, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import { BenchEntriesService } from './bench-entries.service';
import {
  FLOOR_FINGERPRINT,
  FLOOR_HEADERS,
  FLOOR_LEASE_SECONDS,
  FLOOR_TTL_SECONDS,
  floorQueries,
} from './floor-statements';
import type { FloorQueries, FloorStatement } from './floor-statements';

const INSERT_ENTRY = `INSERT INTO bench_entries (amount, note) VALUES ($1, $2)
  RETURNING id, amount, note, created_at AS "createdAt"`;
const LEASE_SECONDS = FLOOR_LEASE_SECONDS;
const FINGERPRINT = FLOOR_FINGERPRINT;
const HEADERS = FLOOR_HEADERS;

/** The lean floor's statements (table `bench_lean_records`, see `AddBenchFloor`). */
const LEAN: Record<'claim' | 'complete', FloorStatement> = {
  claim: {
    name: 'bench_lean_claim',
    text: `INSERT INTO bench_lean_records (scope, idempotency_key, fingerprint, status, owner_token,
             locked_until, expires_at)
           VALUES ($1, $2, $3, 'in_flight', $4, clock_timestamp() + $5::float8 * interval '1 second',
             clock_timestamp() + $6::float8 * interval '1 second')
           ON CONFLICT DO NOTHING RETURNING 1`,
  },
  // Leaves expires_at (indexed) alone: set at the claim, so the update can be HOT.
  complete: {
    name: 'bench_lean_complete',
    text: `UPDATE bench_lean_records SET status = 'completed', owner_token = NULL,
             locked_until = NULL, response_status = $4, response_headers = $5, response_body = $6
           WHERE scope = $1 AND idempotency_key = $2 AND owner_token = $3`,
  },
};

/**
 * The floor: what a perfect library would cost on this schema. The same insert as `/plain`, plus
 * the library's own two statements for a new key (its claim's fresh insert and its completion,
 * the very SQL its TypeORM store sends) issued by hand on the same pool as named prepared statements, with no interceptor, no
 * hook and no fingerprint. `/floor-lean` does the same with a leaner claim (`INSERT … ON CONFLICT
 * DO NOTHING RETURNING`) and a completion that leaves indexed columns alone, on a fillfactor-60
 * table. A key already claimed answers 409 (the bench only sends fresh keys here).
 */
@Controller()
export class FloorController {
  private readonly library: FloorQueries;

  constructor(
    private readonly dataSource: DataSource,
    private readonly entries: BenchEntriesService,
  ) {
    this.library = floorQueries(dataSource);
  }

  private get pool(): Pool {
    return (this.dataSource.driver as unknown as { master: Pool }).master;
  }

  /** `POST /floor`: the library's claim and completion by hand around the insert. */
  @Post('floor')
  async floor(@Headers('idempotency-key') key: string, @Body() body: unknown): Promise<BenchEntry> {
    const owner = randomUUID();
    // A new key's claim is the store's fresh insert (its full claim runs only for a key that
    // exists, which the bench does not send here).
    const claimed = await this.pool.query(this.library.claimFresh(key, owner, '/floor'));
    if (claimed.rowCount !== 1) throw new ConflictException();
    const entry = await this.entries.insert(parseBenchEntryInput(body));
    await this.pool.query(this.library.complete(key, owner, entry));
    return entry;
  }

  /** `POST /floor-lean`: the lean claim and completion by hand around the insert. */
  @Post('floor-lean')
  async floorLean(
    @Headers('idempotency-key') key: string,
    @Body() body: unknown,
  ): Promise<BenchEntry> {
    const owner = randomUUID();
    const claimed = await this.pool.query({
      ...LEAN.claim,
      values: ['', key, FINGERPRINT, owner, LEASE_SECONDS, FLOOR_TTL_SECONDS],
    });
    if (claimed.rowCount !== 1) throw new ConflictException();
    const entry = await this.entries.insert(parseBenchEntryInput(body));
    await this.pool.query({
      ...LEAN.complete,
      values: ['', key, owner, 201, HEADERS, Buffer.from(JSON.stringify(entry))],
    });
    return entry;
  }

  /**
   * `POST /storm-floor`: 409 at once, no database: the floor of a same-key storm (what 1000
   * connections answered 409 by a bare route cost on this machine).
   */
  @Post('storm-floor')
  @HttpCode(409)
  stormFloor(): { code: string } {
    return { code: 'idempotency_key_in_use' };
  }

  /**
   * `POST /floor-tx`: the transactional route's statements by hand, as the library sends them:
   * the claim on its own (autocommit), then `BEGIN; insert; completion; COMMIT` on one client.
   */
  @Post('floor-tx')
  async floorTransactional(
    @Headers('idempotency-key') key: string,
    @Body() body: unknown,
  ): Promise<BenchEntry> {
    const owner = await this.claimAlone(key, '/floor-tx');
    return this.inTransaction(async (client) => this.insertAndComplete(client, key, owner, body));
  }

  /**
   * `POST /floor-tx-typeorm`: `/floor-tx` on a TypeORM query runner, as a TypeORM application
   * writes in a transaction: the claim on its own, then `startTransaction()`, the insert through
   * the runner's `EntityManager`, the completion as the library sends it (named, on the runner's
   * pg client), `commitTransaction()` and `release()`. What TypeORM's transaction machinery adds
   * to `/floor-tx`, which the library's transactional route cannot avoid: its handler writes
   * through an `EntityManager`.
   */
  @Post('floor-tx-typeorm')
  async floorTransactionalTypeOrm(
    @Headers('idempotency-key') key: string,
    @Body() body: unknown,
  ): Promise<BenchEntry> {
    const owner = await this.claimAlone(key, '/floor-tx-typeorm');
    const input = parseBenchEntryInput(body);
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      const rows: BenchEntry[] = await runner.manager.query(INSERT_ENTRY, [
        input.amount,
        input.note ?? null,
      ]);
      const client = (runner as unknown as { databaseConnection: PoolClient }).databaseConnection;
      await client.query(this.library.complete(key, owner, rows[0]));
      await runner.commitTransaction();
      return rows[0];
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * `POST /floor-tx-inside`: the claim inside the handler's transaction instead
   * (`BEGIN; claim; insert; completion; COMMIT`): one commit and one checkout fewer. What it
   * changes is measured here only; see BENCHMARKS.md for what it would mean for duplicates.
   */
  @Post('floor-tx-inside')
  floorTransactionalInside(
    @Headers('idempotency-key') key: string,
    @Body() body: unknown,
  ): Promise<BenchEntry> {
    const owner = randomUUID();
    return this.inTransaction(async (client) => {
      const claimed = await client.query(this.library.claimFresh(key, owner, '/floor-tx-inside'));
      if (claimed.rowCount !== 1) throw new ConflictException();
      return this.insertAndComplete(client, key, owner, body);
    });
  }

  /**
   * Claims a new key on its own (autocommit), as the transactional route does before its
   * transaction.
   * @returns the owner token
   * @throws ConflictException when the key was already claimed
   */
  private async claimAlone(key: string, path: string): Promise<string> {
    const owner = randomUUID();
    const claimed = await this.pool.query(this.library.claimFresh(key, owner, path));
    if (claimed.rowCount !== 1) throw new ConflictException();
    return owner;
  }

  private async insertAndComplete(
    client: PoolClient,
    key: string,
    owner: string,
    body: unknown,
  ): Promise<BenchEntry> {
    const input = parseBenchEntryInput(body);
    const { rows } = await client.query(INSERT_ENTRY, [input.amount, input.note ?? null]);
    const entry: BenchEntry = rows[0];
    await client.query(this.library.complete(key, owner, entry));
    return entry;
  }

  private async inTransaction<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** `POST /plain-tx`: the insert in a plain transaction (`BEGIN; insert; COMMIT`), no library. */
  @Post('plain-tx')
  plainTransaction(@Body() body: unknown): Promise<BenchEntry> {
    return this.entries.insertInOwnTransaction(parseBenchEntryInput(body));
  }
}
