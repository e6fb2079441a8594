import type { PreparedStatement, StatementOptions, StatementResult } from './prepared-statement';
import type { TypeOrmStoreTransaction } from './typeorm-store-transaction';

/**
 * What the TypeORM store lends the statements of its abilities (operations, jobs, health): its
 * DataSource's connections, its timeout and its prepared statements. Implemented by
 * `TypeOrmIdempotencyStore`.
 * @internal
 */
export interface TypeOrmStoreConnection {
  /** How long one call may take, in milliseconds. */
  readonly timeoutMs: number;
  /**
   * Runs one statement outside any transaction, bounded like every store call; with
   * `CONFIRMED` its commit makes an answer final, and a WARNING during it rejects
   * (`IdempotencyCommitUnconfirmedError`).
   */
  run(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
    read?: undefined,
    options?: StatementOptions<StatementResult>,
  ): Promise<StatementResult>;
  /** Opens a transaction on a query runner, bounded like every store call. */
  openTransaction(): Promise<TypeOrmStoreTransaction>;
}
