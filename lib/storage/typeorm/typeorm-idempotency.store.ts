import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../../interfaces/idempotency-record.interface';
import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';
import { wakeTokenOf } from '../../waiting/wake-token';
import { IdempotencyStore } from '../idempotency.store';
import type { IdempotencyStoreCapabilities } from '../idempotency-store.capabilities';
import { jobsTableNameOf, quoteTableName } from './idempotency-table.sql';
import { hasPoolAccess, prepareStatement, runOnPool } from './prepared-statement';
import type { PreparedStatement, StatementResult } from './prepared-statement';
import { runOnNewQueryRunner } from './query-runner-statements';
import { RECORD_TABLE_CHECK_SQL, recordTableProblem } from './record-table-check';
import type { TypeOrmStoreConnection } from './store-connection';
import { readTableHealth } from './typeorm-health.query';
import { TypeOrmOperator } from './typeorm-operator.query';
import { TypeOrmJobStore } from './typeorm-job.store';
import { TypeOrmPhaseStore } from './typeorm-phase.store';
import { TypeOrmStoreTransaction } from './typeorm-store-transaction';
import {
  TypeOrmWakeUps,
  announcedWrite,
  failUnlessWritten,
  notifyWritten,
  wakeUpChannelOf,
} from './typeorm-wake-ups';
import { Deadline } from './with-deadline';

/** How often a claim is retried when a concurrent writer changed the row under it. */
const CLAIM_ATTEMPTS = 5;

/** The longest a timer can wait in Node.js (about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

/** Tuning of the TypeORM store. */
export interface TypeOrmIdempotencyStoreSettings {
  /**
   * How long one store call (claim, complete, release, renew, purgeExpired, beginTransaction,
   * and a transaction's complete, commit and rollback) may take, counting the wait for a pooled
   * connection, before it rejects with `IdempotencyStoreTimeoutError`. The module passes
   * `timeoutSeconds * 1000`.
   * @defaultValue 5000
   */
  timeoutMs: number;
  /**
   * Send the store's statements as named prepared statements (parsed and planned once per
   * connection). `false` sends them unnamed, for connections that do not keep their own server
   * session: PgBouncer in transaction pooling mode before 1.21, or an embedded PGlite served to
   * several connections. The module passes its `preparedStatements` option.
   * @defaultValue true
   */
  preparedStatements?: boolean;
  /**
   * How waiters (`wait`) on other instances learn that a record settled: `'auto'` listens on a
   * dedicated connection (`LISTEN/NOTIFY`) unless a self-test shows notifications cannot reach
   * it (PgBouncer in transaction pooling mode), then they poll; `'poll'` never listens.
   * `typeOrmStore()` passes its `wakeUps` option.
   * @defaultValue 'auto'
   */
  wakeUps?: 'auto' | 'poll';
}

/**
 * PostgreSQL store on the application's TypeORM DataSource. All times come from the database
 * clock, so every instance agrees when a lease lapsed or a record expired:
 *
 * - Every lease and expiry is written as `clock_timestamp() + duration`, measured when the row
 *   is written: not from the start of the transaction (`now()`), which in a transactional
 *   completion is the handler's BEGIN, nor from the start of a statement that waited for a row
 *   lock (`statement_timestamp()`). (A plain `UPDATE` computes its new row before it waits, and
 *   again after only if the row changed meanwhile: behind a writer that rolled back, a renewal
 *   or completion can come out short by that wait. The claim's `ON CONFLICT` locks first, then
 *   computes.)
 * - Every comparison uses `statement_timestamp()`: one instant for the whole statement, so the
 *   claim's snapshot read and its `ON CONFLICT` re-check judge a lease by the same clock. When a
 *   statement waited for a lock, that instant is a little early, which only makes a lease look
 *   live (or a record unexpired) a little longer: the caller gets 409 or retries, and two owners
 *   never hold one key.
 * - Every call settles within `timeoutMs`, counting the wait for a pooled connection; a
 *   connection whose statement ran out of time is closed, never lent out again.
 *
 * - `claim` is one statement (`INSERT … ON CONFLICT DO UPDATE … WHERE`), so of any number of
 *   concurrent callers exactly one wins; losers read the existing row in the same statement. A
 *   key nobody holds takes a plain `INSERT … ON CONFLICT DO NOTHING` first.
 * - `complete`, `release` and `renew` are `UPDATE`/`DELETE … WHERE owner_token = $n`. The
 *   completion changes no indexed column, so it can be a HOT update, and refuses a record an
 *   operation in phases is bound to: only the operation's last step completes that one.
 * - `purgeExpired` deletes a batch chosen with `FOR UPDATE SKIP LOCKED` through the index on
 *   `purge_after` (a lower bound of `expires_at` set by the claim), oldest first,
 *   never an unfinished operation in phases (the reaper marks those abandoned instead);
 *   successive full batches of one pass each start where the previous one ended.
 */
export class TypeOrmIdempotencyStore extends IdempotencyStore implements TypeOrmStoreConnection {
  private readonly table: string;
  private readonly jobsTable: string;
  private readonly sql: Record<
    | 'claimFresh'
    | 'claim'
    | 'complete'
    | 'renew'
    | 'releaseRetry'
    | 'releaseForget'
    | 'completeAnnounced'
    | 'completeOrFail'
    | 'completeAnnouncedOrFail'
    | 'releaseRetryAnnounced'
    | 'releaseForgetAnnounced'
    | 'purge'
    | 'verify',
    PreparedStatement
  >;

  /** How long one call may take, in milliseconds. */
  readonly timeoutMs: number;
  private readonly preparedStatements: boolean;
  private readonly wakeUps: 'auto' | 'poll';
  private readonly channel: string;
  private resolved?: DataSource;
  /**
   * Whether statements run on pg connections lent by TypeORM's driver (named, prepared once
   * per connection) or, where the driver offers no such thing, through query runners.
   * Decided by `verify()` at bootstrap, or by the first call.
   */
  private poolAccess?: boolean;
  /** Whether transactions send their completion with their COMMIT (`commitsPipelined()`). */
  private pipelinedCommits?: boolean;
  /** The latest expiry the current purge pass deleted; `null` between passes. */
  private purgedUpTo: string | null = null;
  private abilities?: IdempotencyStoreCapabilities;

  /**
   * @param dataSourceRef - a PostgreSQL DataSource, or a function that returns it once the
   *   application has initialised it
   * @param tableName - the record table (see the shipped migration)
   * @param settings - the time each call may take (default 5 s)
   * @throws IdempotencyConfigurationError when `settings.timeoutMs` is not a positive number of
   *   milliseconds
   */
  constructor(
    private readonly dataSourceRef: DataSource | (() => DataSource),
    private readonly tableName: string,
    settings: TypeOrmIdempotencyStoreSettings = { timeoutMs: 5000 },
  ) {
    super();
    const { timeoutMs } = settings;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS)) {
      throw IdempotencyConfigurationError.invalidOption(
        'timeoutMs',
        timeoutMs,
        `Use a number of milliseconds from 1 to ${MAX_TIMER_MS}, e.g. 5000.`,
      );
    }
    this.timeoutMs = timeoutMs;
    this.preparedStatements = settings.preparedStatements ?? true;
    this.wakeUps = settings.wakeUps ?? 'auto';
    this.channel = wakeUpChannelOf(tableName);
    this.table = quoteTableName(tableName);
    this.jobsTable = quoteTableName(jobsTableNameOf(tableName));
    const t = this.table;
    const owned = `scope = $1 AND idempotency_key = $2 AND owner_token = $3 AND status = 'in_flight'`;
    // Comparisons: one instant per statement. Writes: the moment the row is written (see above).
    const at = 'statement_timestamp()';
    const written = 'clock_timestamp()';
    // The claim's bound on the expiry: its statement's start, so never later than the
    // expiry written in the same statement or by the completion after it.
    const purgeAfter = `${at} + $6::float8 * interval '1 second'`;
    // Past its TTL and not running. An unfinished operation in phases never expires here: it
    // is resumed by the same request, or marked abandoned by the reaper (docs/design/contract.md#operations-in-phases).
    const expired =
      `r.expires_at <= ${at} AND (r.status = 'completed' OR (r.operation IS NULL ` +
      `AND (r.status <> 'in_flight' OR r.locked_until <= ${at})))`;
    // A record whose handler never started: deleted when it was new, else kept as released.
    const forgetting = `
        WITH forgotten AS (
          DELETE FROM ${t} WHERE ${owned} AND attempts = 1 RETURNING 1
        ), kept AS (
          UPDATE ${t} SET status = 'released', locked_until = NULL, updated_at = ${written}
           WHERE ${owned} AND attempts > 1 RETURNING 1
        )`;
    const sql = {
      // The fast path of a first execution: a key nobody holds is one plain insert, without
      // the CTE below (its lookup, its outcome and its upsert cost PostgreSQL more on every new
      // key). A key that exists inserts nothing and returns no row: then the claim runs.
      claimFresh: `
        INSERT INTO ${t} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
          locked_until, expires_at, purge_after, attempts, method, path, created_at, updated_at)
        VALUES ($1, $2, $7, $3, 'in_flight', $4, ${written} + $5::float8 * interval '1 second',
          ${written} + $6::float8 * interval '1 second', ${purgeAfter}, 1, $8, $9, ${written},
          ${written})
        ON CONFLICT (scope, idempotency_key) DO NOTHING
        RETURNING record_id, attempts`,
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
                   WHEN r.status = 'abandoned' THEN 'abandoned'
                   WHEN r.status = 'in_flight' AND r.locked_until > ${at} THEN 'in_flight'
                   ELSE 'retry'
                 END AS outcome,
                 r.record_id, r.attempts, r.response_status, r.response_headers, r.response_body,
                 EXTRACT(EPOCH FROM r.expires_at - ${at})::float8 * 1000 AS expires_in_ms
            FROM ${t} r
           WHERE r.scope = $1 AND r.idempotency_key = $2
        ), claimed AS (
          INSERT INTO ${t} AS r (scope, idempotency_key, record_id, fingerprint, status, owner_token,
            locked_until, expires_at, purge_after, attempts, method, path, created_at, updated_at)
          SELECT $1::text, $2::varchar, $7::uuid, $3::char(64), 'in_flight', $4::uuid,
                 ${written} + $5::float8 * interval '1 second',
                 ${written} + $6::float8 * interval '1 second', ${purgeAfter},
                 1, $8::varchar, $9::text, ${written}, ${written}
           WHERE NOT EXISTS (SELECT 1 FROM existing WHERE outcome <> 'retry')
          ON CONFLICT (scope, idempotency_key) DO UPDATE SET
            record_id = CASE WHEN ${expired} THEN EXCLUDED.record_id ELSE r.record_id END,
            attempts = CASE WHEN ${expired} THEN 1 ELSE r.attempts + 1 END,
            created_at = CASE WHEN ${expired} THEN ${written} ELSE r.created_at END,
            fingerprint = EXCLUDED.fingerprint,
            status = 'in_flight',
            owner_token = EXCLUDED.owner_token,
            -- Not EXCLUDED's times: those were computed before this update waited for the
            -- row lock (behind a transactional completion, say), and the lease would be short.
            locked_until = ${written} + $5::float8 * interval '1 second',
            expires_at = ${written} + $6::float8 * interval '1 second',
            -- A new record starts its own; a retry of the same one keeps the earlier bound.
            purge_after = CASE WHEN ${expired} THEN ${purgeAfter} ELSE r.purge_after END,
            method = EXCLUDED.method,
            path = EXCLUDED.path,
            response_status = NULL,
            response_headers = NULL,
            response_body = NULL,
            operation = CASE WHEN ${expired} THEN NULL ELSE r.operation END,
            recovery_point = CASE WHEN ${expired} THEN NULL ELSE r.recovery_point END,
            operation_input = CASE WHEN ${expired} THEN NULL ELSE r.operation_input END,
            operation_state = CASE WHEN ${expired} THEN NULL ELSE r.operation_state END,
            operation_settings = CASE WHEN ${expired} THEN NULL ELSE r.operation_settings END,
            updated_at = ${written}
          WHERE (${expired})
             OR (r.fingerprint = EXCLUDED.fingerprint
                 AND (r.status = 'released' OR (r.status = 'in_flight' AND r.locked_until <= ${at})))
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
      // No indexed column changes (purge_after only if a shorter TTL brought the expiry
      // before it), so on the table's spare page room this is a HOT update: the row's new
      // version goes on the same page and no index gets a new entry.
      complete: `
        UPDATE ${t} SET status = 'completed', response_status = $4, response_headers = $5,
               response_body = $6, expires_at = ${written} + $7::float8 * interval '1 second',
               purge_after = LEAST(purge_after, ${written} + $7::float8 * interval '1 second'),
               locked_until = NULL, updated_at = ${written}
         WHERE ${owned} AND operation IS NULL`,
      renew: `
        UPDATE ${t} SET locked_until = ${written} + $4::float8 * interval '1 second',
               updated_at = ${written}
         WHERE ${owned}`,
      releaseRetry: `
        UPDATE ${t} SET status = 'released', locked_until = NULL, updated_at = ${written}
         WHERE ${owned}`,
      // A request rejected before its handler started leaves nothing behind, unless an earlier
      // attempt of the same key did run its handler: then the key stays released.
      releaseForget: `${forgetting}
        SELECT (SELECT count(*) FROM forgotten) + (SELECT count(*) FROM kept) AS n`,
      // Oldest expiry first, from where the pass has got to ($2): the index scan starts there
      // rather than walking over the entries of every row the pass already deleted.
      // Through the index on purge_after (never later than expires_at); the rows it finds
      // that a completion gave a later expiry are left for a later pass.
      purge: `
        WITH gone AS (
          DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM ${t} r
             WHERE r.purge_after <= ${at} AND r.expires_at <= ${at}
               AND NOT (r.status = 'in_flight' AND r.locked_until > ${at})
               AND (r.operation IS NULL OR r.status = 'completed')
               AND r.purge_after >= coalesce($2::timestamptz, '-infinity')
             ORDER BY r.purge_after
             LIMIT $1 FOR UPDATE SKIP LOCKED))
          RETURNING purge_after
        )
        SELECT count(*)::int AS deleted, max(purge_after)::text AS last FROM gone`,
      verify: RECORD_TABLE_CHECK_SQL,
    };
    // A write of a route that may wait (`ref.announce`) tells the listening instances in the same
    // statement, only when it changed the record: one more statement text, no more round trip.
    // Inside a transaction the notification is sent at its commit.
    const statements = {
      ...sql,
      completeAnnounced: announcedWrite(sql.complete, this.channel, '$8'),
      // A transaction's completion sent with its COMMIT: it fails unless it completed the
      // record, so the COMMIT behind it rolls back (TypeOrmStoreTransaction.commitWith).
      completeOrFail: `WITH written AS (${sql.complete} RETURNING 1)
        SELECT ${failUnlessWritten('count(*)::int')} AS n FROM written`,
      completeAnnouncedOrFail: `WITH written AS (${sql.complete} RETURNING 1)
        ${notifyWritten(this.channel, '$8', failUnlessWritten)}`,
      releaseRetryAnnounced: announcedWrite(sql.releaseRetry, this.channel, '$4'),
      releaseForgetAnnounced: `${forgetting}, written AS (
          SELECT 1 FROM forgotten UNION ALL SELECT 1 FROM kept
        ) ${notifyWritten(this.channel, '$4')}`,
    };
    this.sql = Object.fromEntries(
      Object.entries(statements).map(([name, text]) => [name, prepareStatement(text)]),
    ) as Record<keyof typeof statements, PreparedStatement>;
  }

  /**
   * Resolves the DataSource, checks it is PostgreSQL with the record table in place, and decides
   * how statements reach the database: on connections lent by TypeORM's PostgreSQL driver when
   * it offers them (`obtainMasterConnection`, not public API), else through query runners.
   * Called by the module at bootstrap.
   * @throws IdempotencyConfigurationError with the fix when it is not, or when the record table
   *   or its jobs table lacks a column (or the jobs table is missing): the error names each
   *   missing part and the migration (or entity, for `synchronize`) that adds it
   * @throws IdempotencyStoreTimeoutError when the database does not answer in time
   */
  async verify(): Promise<void> {
    const dataSource = this.dataSource;
    const type = String(dataSource.options?.type);
    if (type !== 'postgres') throw IdempotencyConfigurationError.unsupportedDatabase(type);
    this.poolAccess = hasPoolAccess(dataSource);
    const { rows } = await this.run('verify', this.sql.verify, [this.table, this.jobsTable]);
    const problem = recordTableProblem(this.table, this.jobsTable, rows[0]);
    if (problem) throw problem;
  }

  private get dataSource(): DataSource {
    if (!this.resolved) {
      this.resolved =
        typeof this.dataSourceRef === 'function' ? this.dataSourceRef() : this.dataSourceRef;
    }
    return this.resolved;
  }

  /** @inheritDoc */
  claim(request: ClaimRequest): Promise<ClaimResult> {
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
    // One deadline for all attempts: the claim as a whole answers within the timeout.
    const deadline = new Deadline('claim', this.timeoutMs);
    // A new key (most requests) is claimed by the first statement: no further async step.
    return this.run(
      deadline,
      this.sql.claimFresh,
      params,
      (result) => freshClaimOf(result) ?? this.claimExisting(deadline, params),
    );
  }

  /** The claim of a key that has a record: taken over, completed, in flight, or reused. */
  private async claimExisting(deadline: Deadline, params: unknown[]): Promise<ClaimResult> {
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const { rows } = await this.run(deadline, this.sql.claim, params);
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
        case 'abandoned':
          return { outcome: 'abandoned', recordId: row.record_id };
        default:
          return { outcome: 'in_flight', recordId: row.record_id };
      }
    }
    throw new Error(
      `nest-idempotency: the claim of one key changed under it ${CLAIM_ATTEMPTS} times in a row`,
    );
  }

  /** @inheritDoc */
  complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean> {
    try {
      const { statement, params } = this.completion(ref, response, ttlSeconds, false);
      return this.run('complete', statement, params, (result) => written(result, ref));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean> {
    const params = [ref.scope, ref.key, ref.ownerToken];
    if (ref.announce) {
      params.push(wakeTokenOf(ref.scope, ref.key));
      const sql =
        mode === 'retry' ? this.sql.releaseRetryAnnounced : this.sql.releaseForgetAnnounced;
      return Number((await this.run('release', sql, params)).rows[0]?.n) === 1;
    }
    if (mode === 'retry') {
      return (await this.run('release', this.sql.releaseRetry, params)).rowCount === 1;
    }
    const { rows } = await this.run('release', this.sql.releaseForget, params);
    return Number(rows[0]?.n) === 1;
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, lockTimeoutSeconds: number): Promise<boolean> {
    const params = [ref.scope, ref.key, ref.ownerToken, lockTimeoutSeconds];
    return (await this.run('renew', this.sql.renew, params)).rowCount === 1;
  }

  /** @inheritDoc */
  async purgeExpired(batchSize: number): Promise<number> {
    const { rows } = await this.run('purgeExpired', this.sql.purge, [batchSize, this.purgedUpTo]);
    const deleted = Number(rows[0]?.deleted ?? 0);
    // A full batch: the pass goes on from the latest expiry it deleted. A short one ends the
    // pass, and the next starts from the oldest record again, so a row passed over (a live
    // lease then, or locked by another purger) is deleted by a later pass.
    this.purgedUpTo = deleted === batchSize ? (rows[0].last ?? null) : null;
    return deleted;
  }

  /**
   * Operations in phases, staged jobs, health counts, the operator tool's reads and writes and
   * the bootstrap check, all on this
   * store's DataSource, timeout and connection handling (the contract:
   * `IdempotencyStore.capabilities()`).
   * @internal
   */
  override capabilities(): IdempotencyStoreCapabilities {
    if (this.abilities) return this.abilities;
    const jobs = new TypeOrmJobStore(this, this.tableName);
    this.abilities = {
      operations: new TypeOrmPhaseStore(this, this.tableName, jobs),
      jobs,
      health: {
        read: (limit, timeoutMs) => readTableHealth(this, this.tableName, limit, timeoutMs),
      },
      operator: new TypeOrmOperator(this, this.tableName),
      verify: () => this.verify(),
      wakeUps:
        this.wakeUps === 'auto'
          ? new TypeOrmWakeUps(this, () => this.dataSource, this.channel)
          : undefined,
    };
    return this.abilities;
  }

  /** @inheritDoc */
  beginTransaction(): Promise<IdempotencyStoreTransaction> {
    return this.openTransaction().then((tx) => ({
      manager: tx.manager,
      complete: (ref, response, ttlSeconds) => {
        const { statement, params } = this.completion(ref, response, ttlSeconds, false);
        return tx
          .run('complete (in transaction)', statement, params)
          .then((result) => written(result, ref));
      },
      commit: () => tx.commit(),
      rollback: () => tx.rollback(),
      completeAndCommit: this.commitsPipelined()
        ? (ref, response, ttlSeconds) => {
            const { statement, params } = this.completion(ref, response, ttlSeconds, true);
            return tx.commitWith('complete (in transaction)', statement, params);
          }
        : undefined,
    }));
  }

  /**
   * The completion's statement and values; `orFail`: the variant that fails unless it completed
   * the record, to send with the COMMIT.
   */
  private completion(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
    orFail: boolean,
  ): { statement: PreparedStatement; params: unknown[] } {
    const params = [
      ref.scope,
      ref.key,
      ref.ownerToken,
      response.status,
      JSON.stringify(response.headers),
      response.body,
      ttlSeconds,
    ];
    if (!ref.announce) {
      return { statement: orFail ? this.sql.completeOrFail : this.sql.complete, params };
    }
    params.push(wakeTokenOf(ref.scope, ref.key));
    const statement = orFail ? this.sql.completeAnnouncedOrFail : this.sql.completeAnnounced;
    return { statement, params };
  }

  /**
   * Whether a transaction's completion goes with its COMMIT (`completeAndCommit`): not when a
   * TypeORM subscriber listens to commits, which TypeORM would tell of a COMMIT that PostgreSQL
   * turned into a rollback (a completion whose lease was taken over).
   */
  private commitsPipelined(): boolean {
    return (this.pipelinedCommits ??= !this.dataSource.subscribers.some(
      (subscriber) =>
        typeof subscriber.beforeTransactionCommit === 'function' ||
        typeof subscriber.afterTransactionCommit === 'function',
    ));
  }

  /**
   * Opens a transaction on a query runner, bounded like every store call. Internal: used by the
   * phase and job stores, which share this store's DataSource, timeout and connection handling.
   * @internal
   */
  openTransaction(): Promise<TypeOrmStoreTransaction> {
    return TypeOrmStoreTransaction.begin(
      this.dataSource,
      this.timeoutMs,
      this.usesPoolAccess() && this.preparedStatements,
    );
  }

  /**
   * Runs one statement outside any transaction, bounded like every store call. Internal: see
   * `openTransaction()`.
   * @internal
   */
  runStatement(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
  ): Promise<StatementResult> {
    return this.run(operation, statement, values);
  }

  private usesPoolAccess(): boolean {
    return (this.poolAccess ??= hasPoolAccess(this.dataSource));
  }

  /**
   * Runs one statement outside any transaction, within `operation`'s deadline.
   * @param operation - a deadline shared with other statements, or the name of a new one
   * @param read - what the caller wants of the result (on the pool, read without a `then()`)
   */
  private run<T = StatementResult>(
    operation: string | Deadline,
    statement: PreparedStatement,
    values: unknown[],
    read?: (result: StatementResult) => T | PromiseLike<T>,
  ): Promise<T> {
    const deadline =
      typeof operation === 'string' ? new Deadline(operation, this.timeoutMs) : operation;
    // Callers chain on the promise without an async function around them: a DataSource that
    // cannot be resolved rejects rather than throws.
    try {
      if (this.usesPoolAccess()) {
        const { dataSource, preparedStatements } = this;
        return runOnPool(dataSource, statement, values, deadline, preparedStatements, read);
      }
      const ran = runOnNewQueryRunner(this.dataSource, statement, values, deadline);
      return read ? ran.then(read) : (ran as Promise<T>);
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

/** The claim of a new key, or `undefined` when the key has a record (then `claimExisting()`). */
function freshClaimOf(result: StatementResult): ClaimResult | undefined {
  const fresh = result.rows[0];
  return fresh && { outcome: 'claimed', recordId: fresh.record_id, attempt: 1 };
}

/** Whether a completion changed the record: its row count, or `n` when it announced itself. */
function written(result: StatementResult, ref: IdempotencyRecordRef): boolean {
  return ref.announce ? Number(result.rows[0]?.n) === 1 : result.rowCount === 1;
}
