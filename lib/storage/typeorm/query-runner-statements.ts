import type { DataSource, QueryRunner } from 'typeorm';
import { watchCommitWarnings } from './commit-warnings';
import type { PreparedStatement, StatementResult } from './prepared-statement';
import { isStoreTimeout } from './with-deadline';
import type { Deadline } from './with-deadline';

/**
 * Closes a query runner's connection and releases the runner, for a runner whose statement ran
 * out of time: the statement may still be pending on it, so the pool must not lend it out again.
 * pg's `Client.end()` destroys the socket when a query is active, and pg-pool drops a client
 * that is ending when it comes back (TypeORM's `release()` passes no error to say so itself).
 * The database rolls back whatever transaction the connection had open.
 */
export async function discardQueryRunner(runner: QueryRunner): Promise<void> {
  try {
    const connection = (await runner.connect()) as { end?: () => Promise<void> } | undefined;
    if (typeof connection?.end === 'function') connection.end().catch(() => undefined);
  } catch {
    // Never connected: nothing to close.
  }
  await runner.release().catch(() => undefined);
}

/**
 * Runs a statement through TypeORM's public `QueryRunner.query` within `deadline`, inside
 * whatever transaction the runner has open: the path for drivers that do not lend out pg
 * connections. On a timeout the runner is discarded (see `discardQueryRunner`).
 */
export async function runOnQueryRunner(
  runner: QueryRunner,
  statement: PreparedStatement,
  values: unknown[],
  deadline: Deadline,
): Promise<StatementResult> {
  const pending = runner.query(statement.text, values, true).then((result) => ({
    rows: result.records ?? [],
    rowCount: result.affected ?? null,
  }));
  try {
    return await deadline.race(pending, 'PostgreSQL to answer');
  } catch (error) {
    if (isStoreTimeout(error)) await discardQueryRunner(runner);
    throw error;
  }
}

/**
 * Runs one statement on a query runner of its own (autocommit) and releases it: the path that
 * needs only TypeORM's public API, used when the driver does not lend out pg connections.
 * @param confirmed - as `runOnPool`'s: a WARNING during its commit rejects
 */
export async function runOnNewQueryRunner(
  dataSource: DataSource,
  statement: PreparedStatement,
  values: unknown[],
  deadline: Deadline,
  confirmed = false,
): Promise<StatementResult> {
  // The primary even with read replicas: as every store statement (runOnPool lends from `master`).
  const runner = dataSource.createQueryRunner('master');
  let connection: unknown;
  try {
    // A connection that arrives after the deadline releases the runner then: released earlier,
    // TypeORM would keep the late connection checked out for good.
    const connecting = runner.connect() as Promise<unknown>;
    connection = await deadline.race(connecting, 'a pooled connection', () => {
      runner.release().catch(() => undefined);
    });
  } catch (error) {
    if (!isStoreTimeout(error)) await runner.release().catch(() => undefined);
    throw error;
  }
  const endWatch = confirmed ? watchCommitWarnings(connection, deadline.operation) : undefined;
  let discarded = false;
  try {
    const result = await runOnQueryRunner(runner, statement, values, deadline);
    const unconfirmed = endWatch?.();
    if (unconfirmed) throw unconfirmed;
    return result;
  } catch (error) {
    discarded = isStoreTimeout(error);
    throw error;
  } finally {
    endWatch?.();
    if (!discarded) await runner.release();
  }
}
