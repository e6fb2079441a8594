import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { pipelining } from '../../internals/pg-pipeline';
import { watchCommitWarnings } from './commit-warnings';
import { explainStatementError } from './prepared-statement';
import type { PgClient, PreparedStatement, StatementResult } from './prepared-statement';
import { discardQueryRunner, runOnQueryRunner } from './query-runner-statements';
import { IDENTIFY_BACKEND, endBackend } from './transaction-backend';
import type { TransactionBackend } from './transaction-backend';
import { NOTHING_WRITTEN } from './wake-up-statements.sql';
import { Deadline, isStoreTimeout } from './with-deadline';
import type { DeadlineTimer } from './with-deadline';

/**
 * One PostgreSQL transaction of the TypeORM store, on a TypeORM query runner so the handler's
 * `EntityManager` writes in it too. Opening it, each store statement in it, and its commit or
 * rollback are each bounded by the store's timeout. A step that runs out of time closes the
 * connection (the database then rolls the transaction back) instead of returning it to the
 * pool; the transaction is abandoned, its later statements and commit are refused, and a
 * rollback has nothing left to do.
 *
 * Each step is one timer and pg's or TypeORM's own promise, followed with callbacks: this is the
 * transactional route's request path, where a race per step and an async layer per call added
 * a dozen promises per request.
 */
export class TypeOrmStoreTransaction {
  private state: 'open' | 'finished' | 'abandoned' = 'open';
  /** Named after the first store statement, so that `abandon()` can end it. */
  private backend: Promise<TransactionBackend | undefined> | undefined;

  private constructor(
    private readonly runner: QueryRunner,
    private readonly timeoutMs: number,
    /** The runner's pg client, to send store statements as prepared statements on. */
    private readonly client: PgClient | undefined,
    /** Whether `commitWith()` writes its statement and the COMMIT in one round trip. */
    private readonly pipelined: boolean,
    /** The runner's connection, watched for a WARNING while the transaction commits. */
    private readonly connection: unknown,
  ) {}

  /**
   * Checks out a connection and starts a transaction on it, within `timeoutMs` in all.
   * @param namedStatements - send store statements as prepared statements on the pg client
   * @param pipelines - whether `commitWith()` may pipeline on this pg client (`pgPipelineUsable`)
   * @throws IdempotencyStoreTimeoutError when the pool or the database did not answer in time
   */
  static begin(
    dataSource: DataSource,
    timeoutMs: number,
    namedStatements: boolean,
    pipelines: (client: PgClient) => boolean,
  ): Promise<TypeOrmStoreTransaction> {
    return new Promise((resolve, reject) => {
      // Inside the executor: a DataSource that cannot make a runner rejects, as it did when
      // this was an async function. The primary, said (though TypeORM's default): with read
      // replicas, a record read on a lagging one would be missing (docs/running-in-production.md).
      const runner = dataSource.createQueryRunner('master');
      const timer = new Deadline('beginTransaction', timeoutMs).startTimer((timeout) => {
        // Still waiting for a connection: the late one releases the runner (below). Released
        // now, TypeORM would keep that connection checked out for good.
        if (timer.waitingFor === 'a pooled connection') return reject(timeout);
        void discardQueryRunner(runner).then(() => reject(timeout));
      });
      const failed = (error: unknown) => {
        if (timer.stop()) releaseThen(runner, () => reject(error));
      };
      runner.connect().then((connection: unknown) => {
        if (timer.done) return void runner.release().catch(() => undefined);
        timer.waitingFor = 'PostgreSQL to answer';
        runner.startTransaction().then(() => {
          if (!timer.stop()) return;
          const client = namedStatements ? (connection as PgClient) : undefined;
          const pipelined = client !== undefined && pipelines(client);
          resolve(new TypeOrmStoreTransaction(runner, timeoutMs, client, pipelined, connection));
        }, failed);
      }, failed);
    });
  }

  /** The handler's handle on the transaction. */
  get manager(): EntityManager {
    return this.runner.manager;
  }

  /**
   * Runs one store statement in the transaction, within the store's timeout.
   * @param operation - named in the timeout error
   */
  run(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
  ): Promise<StatementResult> {
    const sent = this.send(operation, statement, values);
    if (this.backend) return sent;
    // After the first statement, not before: a `SET TRANSACTION` may only come before any query.
    return sent.then((result) => {
      this.backend ??= this.send('identify backend', IDENTIFY_BACKEND, []).then(
        ({ rows }) => ({ pid: Number(rows[0].pid), began: String(rows[0].began) }),
        () => undefined,
      );
      return this.backend.then(() => result);
    });
  }

  /**
   * Runs the transaction's first store statement, which locks what the transaction works on
   * (after `setup`, a `SET TRANSACTION`, when given); rolls back when it fails or found nothing.
   * @returns its result, or undefined once rolled back
   */
  async lock(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
    setup?: string,
  ): Promise<StatementResult | undefined> {
    try {
      if (setup) await this.runner.manager.query(setup);
      const result = await this.run(operation, statement, values);
      if (result.rows.length > 0 || result.rowCount === 1) return result;
      await this.rollback();
      return undefined;
    } catch (error) {
      await this.rollback().catch(() => undefined);
      throw error;
    }
  }

  private send(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
  ): Promise<StatementResult> {
    const refused = this.refusal(operation);
    if (refused) return refused;
    if (!this.client) {
      const deadline = new Deadline(operation, this.timeoutMs);
      return runOnQueryRunner(this.runner, statement, values, deadline).catch((error: unknown) => {
        if (isStoreTimeout(error)) this.state = 'abandoned';
        throw error;
      });
    }
    const client = this.client;
    return new Promise((resolve, reject) => {
      const timer = this.startTimer(operation, reject);
      client.query({ name: statement.name, text: statement.text, values }, (error, result) => {
        if (!timer.stop()) return;
        if (error) reject(explainStatementError(error, statement));
        else resolve(result);
      });
    });
  }

  /**
   * Commits and gives the connection back.
   * @throws IdempotencyCommitUnconfirmedError when the COMMIT stood but came with a WARNING (a
   *   cancelled wait for a synchronous standby): nothing is to be rolled back
   */
  commit(): Promise<void> {
    return this.refusal('commit') ?? this.finish('commit', () => this.confirmedCommit('commit'));
  }

  /** TypeORM's COMMIT, rejected with `IdempotencyCommitUnconfirmedError` after a WARNING. */
  private confirmedCommit(operation: string): Promise<void> {
    const endWatch = watchCommitWarnings(this.connection, operation);
    return this.runner.commitTransaction().then(
      () => {
        const unconfirmed = endWatch();
        if (unconfirmed) throw unconfirmed;
      },
      (error: unknown) => {
        endWatch();
        throw error;
      },
    );
  }

  /**
   * Sends `statement`, which fails unless it wrote (`failUnlessWritten`), then commits. When the
   * transaction pipelines (`pgPipelineUsable`), the `COMMIT` goes without waiting for the
   * statement's answer, in the same round trip, and PostgreSQL turns it into a rollback when the
   * statement wrote nothing: only for a DataSource with no subscriber to commits, which TypeORM
   * would tell of a commit that rolled back. Otherwise the statement is answered first, then
   * committed or rolled back.
   * @param operation - named in the timeout error
   * @returns false when the statement wrote nothing (nothing was committed)
   * @throws IdempotencyCommitUnconfirmedError as `commit()` does
   */
  commitWith(operation: string, statement: PreparedStatement, values: unknown[]): Promise<boolean> {
    const refused = this.refusal(operation);
    if (refused) return refused;
    if (!this.client || !this.pipelined) {
      // One at a time: the statement, then the commit or the rollback.
      return this.send(operation, statement, values).then(
        () => this.commit().then(() => true),
        (error: unknown) =>
          nothingWritten(error)
            ? this.rollback().then(() => false)
            : Promise.reject(error as Error),
      );
    }
    this.state = 'finished';
    const client = this.client;
    return new Promise((resolve, reject) => {
      const timer = this.startTimer(operation, reject);
      const restore = pipelining(client);
      let failed: unknown;
      client.query({ name: statement.name, text: statement.text, values }, (error) => {
        failed = error ?? undefined;
      });
      const settle = (error: unknown) => {
        restore();
        if (!timer.stop()) return;
        // Committed, or rolled back by PostgreSQL because the statement wrote nothing.
        const owned = error === undefined && failed === undefined;
        if (owned || (error === undefined && nothingWritten(failed))) {
          return void this.runner.release().then(() => resolve(owned), reject);
        }
        releaseThen(this.runner, () => reject(explainStatementError(failed ?? error, statement)));
      };
      this.confirmedCommit(operation).then(() => settle(undefined), settle);
    });
  }

  /** Rolls back (when still open) and gives the connection back. */
  rollback(): Promise<void> {
    if (this.state !== 'open') return Promise.resolve();
    return this.finish('rollback', () =>
      this.runner.isTransactionActive ? this.runner.rollbackTransaction() : Promise.resolve(),
    );
  }

  /**
   * Ends the transaction by closing its connection, then ending its backend from another one
   * (see `endBackend`): PostgreSQL does not notice the closed socket while a statement of it
   * still runs, and would keep its locks until that statement returned. A rollback would wait
   * for that statement too. For a step whose run lost its lease, a job past its timeout.
   */
  async abandon(): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'abandoned';
    const backend = this.backend;
    await discardQueryRunner(this.runner);
    const named = await backend;
    if (named) await endBackend(this.runner.connection, named, this.timeoutMs);
  }

  private finish(operation: string, end: () => Promise<void>): Promise<void> {
    this.state = 'finished';
    return new Promise((resolve, reject) => {
      const timer = this.startTimer(operation, reject);
      end().then(
        () => {
          if (timer.stop()) this.runner.release().then(resolve, reject);
        },
        (error: unknown) => {
          if (timer.stop()) releaseThen(this.runner, () => reject(error));
        },
      );
    });
  }

  /**
   * The timer of one step on the open connection. When it fires first, the transaction is
   * abandoned: a COMMIT that timed out may or may not have reached the database, so the caller
   * must treat the outcome as unknown (an owner-guarded write says later); the connection is
   * closed before the timeout is reported.
   */
  private startTimer(operation: string, reject: (error: unknown) => void): DeadlineTimer {
    const timer = new Deadline(operation, this.timeoutMs).startTimer((timeout) => {
      this.state = 'abandoned';
      void discardQueryRunner(this.runner).then(() => reject(timeout));
    });
    timer.waitingFor = 'PostgreSQL to answer';
    return timer;
  }

  /** A rejection when the transaction is no longer open, else undefined. */
  private refusal(operation: string): Promise<never> | undefined {
    if (this.state === 'open') return undefined;
    const why =
      this.state === 'abandoned'
        ? 'the transaction was abandoned after a timeout and its connection closed'
        : 'the transaction has already ended';
    return Promise.reject(new Error(`nest-idempotency: ${operation} refused: ${why}`));
  }
}

/** Gives the runner's connection back, then settles, whether or not the release succeeded. */
function releaseThen(runner: QueryRunner, settle: () => void): Promise<void> {
  return runner.release().then(settle, settle);
}

/** Whether `error` is a `failUnlessWritten` statement's: it found nothing to write. */
function nothingWritten(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === NOTHING_WRITTEN;
}
