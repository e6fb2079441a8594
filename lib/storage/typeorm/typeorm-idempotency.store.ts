import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../../interfaces/idempotency-record.interface';
import { IdempotencyConfigurationError } from '../../errors/idempotency-configuration.error';
import { IdempotencyStore } from '../idempotency.store';
import { quoteTableName } from './idempotency-table.sql';
import { prepareStatement, runOnPool, runOnQueryRunner } from './prepared-statement';
import type { PreparedStatement, StatementResult } from './prepared-statement';

/** How often a claim is retried when a concurrent writer changed the row under it. */
const CLAIM_ATTEMPTS = 5;

/**
 * PostgreSQL store on the application's TypeORM DataSource. All time comparisons use the
 * database clock (`now()`), so every instance agrees when a lease lapsed or a record expired.
 *
 * - `claim` is one statement (`INSERT … ON CONFLICT DO UPDATE … WHERE`), so of any number of
 *   concurrent callers exactly one wins; losers read the existing row in the same statement.
 * - `complete`, `release` and `renew` are `UPDATE`/`DELETE … WHERE owner_token = $n`.
 * - `purgeExpired` deletes a batch chosen with `FOR UPDATE SKIP LOCKED`, oldest expiry first;
 *   successive full batches of one pass each start where the previous one ended.
 */
export class TypeOrmIdempotencyStore extends IdempotencyStore {
  private readonly table: string;
  private readonly sql: Record<
    'claim' | 'complete' | 'renew' | 'releaseRetry' | 'releaseForget' | 'purge' | 'verify',
    PreparedStatement
  >;

  private resolved?: DataSource;
  /** The latest expiry the current purge pass deleted; `null` between passes. */
  private purgedUpTo: string | null = null;

  /**
   * @param dataSource - a PostgreSQL DataSource, or a function that returns it once the
   *   application has initialised it
   * @param tableName - the record table (see the shipped migration)
   */
  constructor(
    private readonly dataSourceRef: DataSource | (() => DataSource),
    tableName: string,
  ) {
    super();
    this.table = quoteTableName(tableName);
    const t = this.table;
    const owned = `scope = $1 AND idempotency_key = $2 AND owner_token = $3 AND status = 'in_flight'`;
    const expired = `r.expires_at <= now() AND (r.status <> 'in_flight' OR r.locked_until <= now())`;
    const sql = {
      // The snapshot's row answers most calls without writing: a replay, a mismatch or a live
      // lease is read, not locked, so the statement takes no transaction id and no WAL flush.
      // Only a new, expired, released or lapsed key reaches the INSERT, whose ON CONFLICT
      // re-checks the row's latest version, so of concurrent callers exactly one wins.
      claim: `
        WITH existing AS (
          SELECT CASE
                   WHEN ${expired} THEN 'retry'
                   WHEN r.fingerprint <> $3 THEN 'mismatch'
                   WHEN r.status = 'completed' THEN 'completed'
                   WHEN r.status = 'in_flight' AND r.locked_until > now() THEN 'in_flight'
                   ELSE 'retry'
                 END AS outcome,
                 r.record_id, r.attempts, r.response_status, r.response_headers, r.response_body,
                 EXTRACT(EPOCH FROM r.expires_at - now())::float8 * 1000 AS expires_in_ms
            FROM ${t} r
           WHERE r.scope = $1 AND r.idempotency_key = $2
        ), claimed AS (
          INSERT INTO ${t} AS r (scope, idempotency_key, record_id, fingerprint, status, owner_token,
            locked_until, expires_at, attempts, method, path, created_at, updated_at)
          SELECT $1::text, $2::varchar, $7::uuid, $3::char(64), 'in_flight', $4::uuid,
                 now() + $5::float8 * interval '1 second', now() + $6::float8 * interval '1 second',
                 1, $8::varchar, $9::text, now(), now()
           WHERE NOT EXISTS (SELECT 1 FROM existing WHERE outcome <> 'retry')
          ON CONFLICT (scope, idempotency_key) DO UPDATE SET
            record_id = CASE WHEN ${expired} THEN EXCLUDED.record_id ELSE r.record_id END,
            attempts = CASE WHEN ${expired} THEN 1 ELSE r.attempts + 1 END,
            created_at = CASE WHEN ${expired} THEN now() ELSE r.created_at END,
            fingerprint = EXCLUDED.fingerprint,
            status = 'in_flight',
            owner_token = EXCLUDED.owner_token,
            locked_until = EXCLUDED.locked_until,
            expires_at = EXCLUDED.expires_at,
            method = EXCLUDED.method,
            path = EXCLUDED.path,
            response_status = NULL,
            response_headers = NULL,
            response_body = NULL,
            updated_at = now()
          WHERE (${expired})
             OR (r.fingerprint = EXCLUDED.fingerprint
                 AND (r.status = 'released' OR (r.status = 'in_flight' AND r.locked_until <= now())))
          RETURNING r.record_id, r.attempts
        )
        SELECT 'claimed' AS outcome, c.record_id, c.attempts,
               NULL::smallint AS response_status, NULL::jsonb AS response_headers,
               NULL::bytea AS response_body, NULL::float8 AS expires_in_ms
          FROM claimed c
        UNION ALL
        SELECT e.outcome, e.record_id, e.attempts, e.response_status, e.response_headers,
               e.response_body, e.expires_in_ms
          FROM existing e
         WHERE NOT EXISTS (SELECT 1 FROM claimed)`,
      complete: `
        UPDATE ${t} SET status = 'completed', response_status = $4, response_headers = $5,
               response_body = $6, expires_at = now() + $7::float8 * interval '1 second',
               locked_until = NULL, updated_at = now()
         WHERE ${owned}`,
      renew: `
        UPDATE ${t} SET locked_until = now() + $4::float8 * interval '1 second', updated_at = now()
         WHERE ${owned}`,
      releaseRetry: `
        UPDATE ${t} SET status = 'released', locked_until = NULL, updated_at = now()
         WHERE ${owned}`,
      // A request rejected before its handler started leaves nothing behind, unless an earlier
      // attempt of the same key did run its handler: then the key stays released.
      releaseForget: `
        WITH forgotten AS (
          DELETE FROM ${t} WHERE ${owned} AND attempts = 1 RETURNING 1
        ), kept AS (
          UPDATE ${t} SET status = 'released', locked_until = NULL, updated_at = now()
           WHERE ${owned} AND attempts > 1 RETURNING 1
        )
        SELECT (SELECT count(*) FROM forgotten) + (SELECT count(*) FROM kept) AS n`,
      // Oldest expiry first, from where the pass has got to ($2): the index scan starts there
      // rather than walking over the entries of every row the pass already deleted.
      purge: `
        WITH gone AS (
          DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM ${t} r
             WHERE r.expires_at <= now() AND NOT (r.status = 'in_flight' AND r.locked_until > now())
               AND r.expires_at >= coalesce($2::timestamptz, '-infinity')
             ORDER BY r.expires_at
             LIMIT $1 FOR UPDATE SKIP LOCKED))
          RETURNING expires_at
        )
        SELECT count(*)::int AS deleted, max(expires_at)::text AS last FROM gone`,
      verify: 'SELECT to_regclass($1) IS NOT NULL AS present',
    };
    this.sql = Object.fromEntries(
      Object.entries(sql).map(([name, text]) => [name, prepareStatement(text)]),
    ) as Record<keyof typeof sql, PreparedStatement>;
  }

  /**
   * Resolves the DataSource and checks it is PostgreSQL with the record table in place.
   * Called by the module at bootstrap.
   * @throws IdempotencyConfigurationError with the fix when it is not
   */
  async verify(): Promise<void> {
    const dataSource = this.dataSource;
    const type = String(dataSource.options?.type);
    if (type !== 'postgres') throw IdempotencyConfigurationError.unsupportedDatabase(type);
    const { rows } = await this.run(this.sql.verify, [this.table]);
    if (rows[0]?.present !== true) throw IdempotencyConfigurationError.tableMissing(this.table);
  }

  private get dataSource(): DataSource {
    if (!this.resolved) {
      this.resolved =
        typeof this.dataSourceRef === 'function' ? this.dataSourceRef() : this.dataSourceRef;
    }
    return this.resolved;
  }

  /** @inheritDoc */
  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const params = [
      request.scope,
      request.key,
      request.fingerprint,
      request.ownerToken,
      request.lockTimeoutSeconds,
      request.ttlSeconds,
      randomUUID(),
      request.method,
      request.path,
    ];
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const { rows } = await this.run(this.sql.claim, params);
      const row = rows[0];
      if (!row || row.outcome === 'retry') continue;
      switch (row.outcome) {
        case 'claimed':
          return { outcome: 'claimed', recordId: row.record_id, attempt: Number(row.attempts) };
        case 'completed':
          return {
            outcome: 'completed',
            recordId: row.record_id,
            response: {
              status: Number(row.response_status),
              headers: row.response_headers ?? {},
              body: row.response_body ?? Buffer.alloc(0),
            },
            expiresInMs: Number(row.expires_in_ms),
          };
        case 'mismatch':
          return { outcome: 'mismatch', recordId: row.record_id };
        default:
          return { outcome: 'in_flight', recordId: row.record_id };
      }
    }
    throw new Error(
      `nest-idempotency: the claim of one key changed under it ${CLAIM_ATTEMPTS} times in a row`,
    );
  }

  /** @inheritDoc */
  async complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean> {
    return this.completeWith((sql, params) => this.run(sql, params), ref, response, ttlSeconds);
  }

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean> {
    const params = [ref.scope, ref.key, ref.ownerToken];
    if (mode === 'retry') return (await this.run(this.sql.releaseRetry, params)).rowCount === 1;
    const { rows } = await this.run(this.sql.releaseForget, params);
    return Number(rows[0]?.n) === 1;
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, lockTimeoutSeconds: number): Promise<boolean> {
    const params = [ref.scope, ref.key, ref.ownerToken, lockTimeoutSeconds];
    return (await this.run(this.sql.renew, params)).rowCount === 1;
  }

  /** @inheritDoc */
  async purgeExpired(batchSize: number): Promise<number> {
    const { rows } = await this.run(this.sql.purge, [batchSize, this.purgedUpTo]);
    const deleted = Number(rows[0]?.deleted ?? 0);
    // A full batch: the pass goes on from the latest expiry it deleted. A short one ends the
    // pass, and the next starts from the oldest record again, so a row passed over (a live
    // lease then, or locked by another purger) is deleted by a later pass.
    this.purgedUpTo = deleted === batchSize ? (rows[0].last ?? null) : null;
    return deleted;
  }

  /** @inheritDoc */
  async beginTransaction(): Promise<IdempotencyStoreTransaction> {
    const runner = this.dataSource.createQueryRunner();
    try {
      await runner.connect();
      await runner.startTransaction();
    } catch (err) {
      await runner.release().catch(() => undefined);
      throw err;
    }
    const finish = async (how: 'commit' | 'rollback') => {
      try {
        if (how === 'commit') await runner.commitTransaction();
        else if (runner.isTransactionActive) await runner.rollbackTransaction();
      } finally {
        await runner.release();
      }
    };
    return {
      manager: runner.manager,
      complete: (ref, response, ttlSeconds) =>
        this.completeWith(
          (statement, values) => runOnQueryRunner(runner, statement, values),
          ref,
          response,
          ttlSeconds,
        ),
      commit: () => finish('commit'),
      rollback: () => finish('rollback'),
    };
  }

  private async completeWith(
    run: (statement: PreparedStatement, values: unknown[]) => Promise<StatementResult>,
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean> {
    const result = await run(this.sql.complete, [
      ref.scope,
      ref.key,
      ref.ownerToken,
      response.status,
      JSON.stringify(response.headers),
      response.body,
      ttlSeconds,
    ]);
    return result.rowCount === 1;
  }

  private run(statement: PreparedStatement, values: unknown[]): Promise<StatementResult> {
    return runOnPool(this.dataSource, statement, values);
  }
}
