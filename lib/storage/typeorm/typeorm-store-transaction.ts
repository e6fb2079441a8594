import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { PreparedStatement, StatementResult } from './prepared-statement';
import {
  connectQueryRunner,
  discardQueryRunner,
  runOnQueryRunner,
} from './query-runner-statements';
import { Deadline, isStoreTimeout } from './with-deadline';

/**
 * One PostgreSQL transaction of the TypeORM store, on a TypeORM query runner so the handler's
 * `EntityManager` writes in it too. Opening it, each store statement in it, and its commit or
 * rollback are each bounded by the store's timeout. A step that runs out of time closes the
 * connection (the database then rolls the transaction back) instead of returning it to the
 * pool; the transaction is abandoned, its later statements and commit are refused, and a
 * rollback has nothing left to do.
 */
export class TypeOrmStoreTransaction {
  private state: 'open' | 'finished' | 'abandoned' = 'open';

  private constructor(
    private readonly runner: QueryRunner,
    private readonly timeoutMs: number,
    private readonly namedStatements: boolean,
  ) {}

  /**
   * Checks out a connection and starts a transaction on it, within `timeoutMs` in all.
   * @param namedStatements - send store statements as prepared statements on the pg client
   * @throws IdempotencyStoreTimeoutError when the pool or the database did not answer in time
   */
  static async begin(
    dataSource: DataSource,
    timeoutMs: number,
    namedStatements: boolean,
  ): Promise<TypeOrmStoreTransaction> {
    const deadline = new Deadline('beginTransaction', timeoutMs);
    const runner = dataSource.createQueryRunner();
    await connectQueryRunner(runner, deadline);
    try {
      await deadline.race(runner.startTransaction(), 'PostgreSQL to answer');
    } catch (error) {
      if (isStoreTimeout(error)) await discardQueryRunner(runner);
      else await runner.release().catch(() => undefined);
      throw error;
    }
    return new TypeOrmStoreTransaction(runner, timeoutMs, namedStatements);
  }

  /** The handler's handle on the transaction. */
  get manager(): EntityManager {
    return this.runner.manager;
  }

  /**
   * Runs one store statement in the transaction, within the store's timeout.
   * @param operation - named in the timeout error
   */
  async run(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
  ): Promise<StatementResult> {
    this.assertOpen(operation);
    const deadline = new Deadline(operation, this.timeoutMs);
    try {
      return await runOnQueryRunner(this.runner, statement, values, deadline, this.namedStatements);
    } catch (error) {
      if (isStoreTimeout(error)) this.state = 'abandoned';
      throw error;
    }
  }

  /** Commits and gives the connection back. */
  async commit(): Promise<void> {
    this.assertOpen('commit');
    await this.finish('commit', () => this.runner.commitTransaction());
  }

  /** Rolls back (when still open) and gives the connection back. */
  async rollback(): Promise<void> {
    if (this.state !== 'open') return;
    await this.finish('rollback', async () => {
      if (this.runner.isTransactionActive) await this.runner.rollbackTransaction();
    });
  }

  /**
   * Ends the transaction by closing its connection: PostgreSQL rolls it back and releases its
   * locks at once, even while a statement of it is still running (a rollback would wait for
   * that statement). For a step whose run lost its lease.
   */
  async abandon(): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'abandoned';
    await discardQueryRunner(this.runner);
  }

  private async finish(operation: string, end: () => Promise<void>): Promise<void> {
    this.state = 'finished';
    const deadline = new Deadline(operation, this.timeoutMs);
    try {
      await deadline.race(end(), 'PostgreSQL to answer');
    } catch (error) {
      if (isStoreTimeout(error)) {
        // A COMMIT that timed out may or may not have reached the database: the caller cannot
        // tell, and must treat the outcome as unknown (an owner-guarded write says later).
        this.state = 'abandoned';
        await discardQueryRunner(this.runner);
      }
      throw error;
    } finally {
      if (this.state === 'finished') await this.runner.release();
    }
  }

  private assertOpen(operation: string): void {
    if (this.state === 'open') return;
    throw new Error(
      this.state === 'abandoned'
        ? `nest-idempotency: ${operation} refused: the transaction was abandoned after a timeout ` +
            'and its connection closed'
        : `nest-idempotency: ${operation} refused: the transaction has already ended`,
    );
  }
}
