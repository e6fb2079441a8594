import { firstRecordId } from '../record-id';
import type { DataSource } from 'typeorm';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../../interfaces/idempotency-record.interface';
import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';
import { pgPipelineUsable } from '../../internals/pg-pipeline';
import { wakeTokenOf } from '../../waiting/wake-token';
import { IdempotencyStore } from '../idempotency.store';
import { rejectOnThrow } from '../../utils/reject-on-throw';
import type { IdempotencyStoreCapabilities } from '../idempotency-store.capabilities';
import { jobsTableNameOf, quoteTableName } from './idempotency-table.sql';
import { hasPoolAccess, prepareStatements, runOnPool } from './prepared-statement';
import type { PreparedStatement, StatementOptions, StatementResult } from './prepared-statement';
import { recoverCompletion } from './completion-retry';
import { isDatabaseUnavailable } from './database-unavailable';
import { runOnNewQueryRunner } from './query-runner-statements';
import { claimOutcomeOf, freshClaimOf, responseValues, writtenOf } from './record-rows';
import { recordStatements } from './record-statements.sql';
import type { RecordStatementName } from './record-statements.sql';
import { recordTableProblem } from './record-table-check';
import type { TypeOrmStoreConnection } from './store-connection';
import { readTableHealth } from './typeorm-health.query';
import { TypeOrmOperator } from './typeorm-operator.query';
import { TypeOrmJobStore } from './typeorm-job.store';
import { TypeOrmPhaseStore } from './typeorm-phase.store';
import { TypeOrmStoreTransaction } from './typeorm-store-transaction';
import { TypeOrmWakeUps, wakeUpChannelOf } from './typeorm-wake-ups';
import { timeoutMsOf } from './typeorm-store.settings';
import type { TypeOrmIdempotencyStoreSettings } from './typeorm-store.settings';
import { Deadline } from './with-deadline';

/** How often a claim is retried when a concurrent writer changed the row under it. */
const CLAIM_ATTEMPTS = 5;

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
 *   operation in phases is bound to: only the operation's last step completes that one. One
 *   whose connection failed is sent again until the timeout, counted from the failure, ends.
 * - `purgeExpired` deletes a batch chosen with `FOR UPDATE SKIP LOCKED` through the index on
 *   `purge_after` (a lower bound of `expires_at` set by the claim), oldest first,
 *   never an unfinished operation in phases (the reaper marks those abandoned instead);
 *   successive full batches of one pass each start where the previous one ended.
 */
export class TypeOrmIdempotencyStore extends IdempotencyStore implements TypeOrmStoreConnection {
  private readonly sql: Record<RecordStatementName, PreparedStatement>;

  /** How long one call may take, in milliseconds. */
  readonly timeoutMs: number;
  private readonly preparedStatements: boolean;
  private readonly wakeUps: 'auto' | 'poll';
  private resolved?: DataSource;
  /**
   * Whether statements run on the pg pool of TypeORM's driver (named, prepared once per
   * connection) or, where the driver has none, through query runners. Decided by `verify()` at
   * bootstrap, or by the first call.
   */
  private poolAccess?: boolean;
  /**
   * Whether transactions send their completion with their COMMIT in one round trip: no TypeORM
   * subscriber to commits, and pg's pipeline flag usable (`pgPipelineUsable`). Decided on the
   * first transaction, which `verify()` opens at bootstrap.
   */
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
    this.timeoutMs = timeoutMsOf(settings);
    this.preparedStatements = settings.preparedStatements ?? true;
    this.wakeUps = settings.wakeUps ?? 'auto';
    this.sql = prepareStatements(recordStatements(tableName));
  }

  /**
   * Resolves the DataSource, checks it is PostgreSQL with the record table in place, and decides
   * how statements reach the database: on the pg pool of TypeORM's PostgreSQL driver (its public
   * `master`) when it has one, else through query runners; and whether a transaction's completion
   * goes with its COMMIT. Called by the module at bootstrap.
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
    const table = quoteTableName(this.tableName);
    const jobsTable = quoteTableName(jobsTableNameOf(this.tableName));
    const { rows } = await this.run('verify', this.sql.verify, [table, jobsTable]);
    const problem = recordTableProblem(table, jobsTable, rows[0]);
    if (problem) throw problem;
    // A transaction at bootstrap makes the pipeline check (`pipelines`) then, not on a request.
    await (await this.openTransaction()).rollback();
  }

  private get dataSource(): DataSource {
    const ref = this.dataSourceRef;
    return (this.resolved ??= typeof ref === 'function' ? ref() : ref);
  }

  /** @inheritDoc */
  claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, fingerprint, ownerToken, lockTimeoutSeconds, ttlSeconds } = request;
    const params = [scope, key, fingerprint, ownerToken, lockTimeoutSeconds, ttlSeconds];
    params.push(firstRecordId(scope, key), request.method, request.path);
    // One deadline for all attempts: the claim as a whole answers within the timeout.
    const deadline = new Deadline('claim', this.timeoutMs);
    // A new key (most requests) is claimed by the first statement: no further async step.
    const read = (result: StatementResult) =>
      freshClaimOf(result) ?? this.claimExisting(deadline, params);
    return this.run(deadline, this.sql.claimFresh, params, read);
  }

  /** The claim of a key that has a record: taken over, completed, in flight, or reused. */
  private async claimExisting(deadline: Deadline, params: unknown[]): Promise<ClaimResult> {
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const { rows } = await this.run(deadline, this.sql.claim, params);
      const outcome = claimOutcomeOf(rows[0]);
      if (outcome) return outcome;
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
    return rejectOnThrow(() => {
      const { statement, params } = this.completion(ref, response, ttlSeconds, false);
      const read = (result: StatementResult) => writtenOf(result, ref.announce === true);
      const options = ref.announce ? this.completeAnnounced : this.completePlain;
      return this.run('complete', statement, params, read, options);
    });
  }

  /** A completion's commit is confirmed; one whose connection failed is sent again. */
  private completionOptions(announced: boolean): StatementOptions<boolean> {
    return {
      confirmed: true,
      recover: (error, values) =>
        recoverCompletion(error, announced, this.sql, this.timeoutMs, (deadline, sql) =>
          this.run(deadline, sql, values),
        ),
    };
  }

  private readonly completePlain = this.completionOptions(false);
  private readonly completeAnnounced = this.completionOptions(true);

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean> {
    const params = [ref.scope, ref.key, ref.ownerToken];
    const announced = ref.announce === true;
    if (announced) params.push(wakeTokenOf(ref.scope, ref.key));
    const statement = announced
      ? { retry: this.sql.releaseRetryAnnounced, forget: this.sql.releaseForgetAnnounced }[mode]
      : { retry: this.sql.releaseRetry, forget: this.sql.releaseForget }[mode];
    // A release for good counts its two writes as `n`, as an announced write does.
    return writtenOf(await this.run('release', statement, params), announced || mode === 'forget');
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
        read: (limit, timeoutMs) => readTableHealth(this, this.sql.health, limit, timeoutMs),
      },
      operator: new TypeOrmOperator(this, this.tableName),
      verify: () => this.verify(),
      wakeUps:
        this.wakeUps === 'auto'
          ? new TypeOrmWakeUps(this, () => this.dataSource, wakeUpChannelOf(this.tableName))
          : undefined,
    };
    return this.abilities;
  }

  /**
   * Whether `error` means PostgreSQL could not be reached (down, restarting, refusing
   * connections, a connection cut) or a call ran out of time: `isDatabaseUnavailable()`.
   * @param error - what a store call, the transaction or the handler's query threw
   */
  override isUnavailable(error: unknown): boolean {
    return isDatabaseUnavailable(error);
  }

  /** @inheritDoc */
  beginTransaction(): Promise<IdempotencyStoreTransaction> {
    return this.openTransaction().then((tx) => ({
      manager: tx.manager,
      complete: (ref, response, ttlSeconds) => {
        const { statement, params } = this.completion(ref, response, ttlSeconds, false);
        return tx
          .run('complete (in transaction)', statement, params)
          .then((result) => writtenOf(result, ref.announce === true));
      },
      commit: () => tx.commit(),
      rollback: () => tx.rollback(),
      completeAndCommit: (ref, response, ttlSeconds) => {
        const { statement, params } = this.completion(ref, response, ttlSeconds, true);
        return tx.commitWith('complete (in transaction)', statement, params);
      },
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
    const params = [ref.scope, ref.key, ref.ownerToken, ...responseValues(response, ttlSeconds)];
    if (!ref.announce) {
      return { statement: orFail ? this.sql.completeOrFail : this.sql.complete, params };
    }
    params.push(wakeTokenOf(ref.scope, ref.key));
    const statement = orFail ? this.sql.completeAnnouncedOrFail : this.sql.completeAnnounced;
    return { statement, params };
  }

  /**
   * Whether a transaction's completion may go with its COMMIT, decided on the first
   * transaction's pg client: not when a TypeORM subscriber listens to commits, which TypeORM
   * would tell of a COMMIT that PostgreSQL turned into a rollback (a completion whose lease was
   * taken over); and only when pg's pipeline flag is usable (`pgPipelineUsable`).
   */
  private readonly pipelines = (client: unknown): boolean =>
    (this.pipelinedCommits ??=
      !this.dataSource.subscribers.some(
        (subscriber) =>
          typeof subscriber.beforeTransactionCommit === 'function' ||
          typeof subscriber.afterTransactionCommit === 'function',
      ) && pgPipelineUsable(client));

  /**
   * Opens a transaction on a query runner, bounded like every store call. Internal: used by the
   * phase and job stores, which share this store's DataSource, timeout and connection handling.
   * @internal
   */
  openTransaction(): Promise<TypeOrmStoreTransaction> {
    const named = this.usesPoolAccess() && this.preparedStatements;
    return TypeOrmStoreTransaction.begin(this.dataSource, this.timeoutMs, named, this.pipelines);
  }

  private usesPoolAccess(): boolean {
    if (this.poolAccess !== undefined) return this.poolAccess;
    const access = hasPoolAccess(this.dataSource);
    // The pool exists once the DataSource is initialised: only then is its absence final.
    if (access || this.dataSource.isInitialized) this.poolAccess = access;
    return access;
  }

  /**
   * Runs one statement outside any transaction, within `operation`'s deadline. Internal: used by
   * the phase and job stores too.
   * @param operation - a deadline shared with other statements, or the name of a new one
   * @param read - what the caller wants of the result (on the pool, read without a `then()`)
   * @param options - whether its commit is confirmed, what becomes of it when it fails (`runOnPool`)
   * @internal
   */
  run<T = StatementResult>(
    operation: string | Deadline,
    statement: PreparedStatement,
    values: unknown[],
    read?: (result: StatementResult) => T | PromiseLike<T>,
    options?: StatementOptions<T>,
  ): Promise<T> {
    const deadline =
      typeof operation === 'string' ? new Deadline(operation, this.timeoutMs) : operation;
    // A DataSource that cannot be resolved rejects rather than throws.
    return rejectOnThrow(() => {
      if (this.usesPoolAccess()) {
        const { dataSource, preparedStatements: prepared } = this;
        return runOnPool(dataSource, statement, values, deadline, prepared, read, options);
      }
      const { confirmed, recover } = options ?? {};
      const ran = runOnNewQueryRunner(this.dataSource, statement, values, deadline, confirmed);
      const failed =
        recover && ((error: unknown) => recover(error, values) ?? Promise.reject(error));
      return read || failed ? ran.then(read, failed) : (ran as Promise<T>);
    });
  }
}
