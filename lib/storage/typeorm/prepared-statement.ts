import { createHash } from 'node:crypto';
import type { DataSource, QueryRunner } from 'typeorm';

/**
 * A SQL statement with a stable name. node-postgres prepares a named statement once per
 * connection and afterwards sends only its parameters, so PostgreSQL skips parsing and planning
 * the claim's CTE on every request.
 */
export interface PreparedStatement {
  readonly name: string;
  readonly text: string;
}

/** What a node-postgres result carries that the store reads. */
export interface StatementResult {
  rows: any[];
  rowCount: number | null;
}

/** The part of a node-postgres client the store uses. */
interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<StatementResult>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
}

/** TypeORM's PostgreSQL driver, as far as the store uses it. */
interface PostgresDriverLike {
  obtainMasterConnection(): Promise<[PgClient, (error?: unknown) => void]>;
}

/**
 * Names a statement after a hash of its text, so two tables (or two versions of the library)
 * never share a prepared statement on one connection.
 */
export function prepareStatement(text: string): PreparedStatement {
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return { name: `nest_idempotency_${digest}`, text };
}

/**
 * Runs a prepared statement on a connection of the DataSource's pool and gives the connection
 * back. A connection that failed underneath (the server went away) is handed back with the
 * error, so the pool discards it instead of lending it out again.
 */
export async function runOnPool(
  dataSource: DataSource,
  statement: PreparedStatement,
  values: unknown[],
): Promise<StatementResult> {
  const driver = dataSource.driver as unknown as PostgresDriverLike;
  const [client, release] = await driver.obtainMasterConnection();
  let broken: unknown;
  const onError = (error: Error) => (broken = error);
  // A checked-out pg client has no error listener of its own: without this one, a connection
  // dropped by the server between two queries would crash the process.
  client.on('error', onError);
  try {
    return await client.query({ ...statement, values });
  } catch (error) {
    if (!isServerError(error)) broken = error;
    throw error;
  } finally {
    client.removeListener('error', onError);
    release(broken);
  }
}

/**
 * Runs a prepared statement on the connection of a query runner (inside its transaction).
 */
export async function runOnQueryRunner(
  runner: QueryRunner,
  statement: PreparedStatement,
  values: unknown[],
): Promise<StatementResult> {
  const client = (await runner.connect()) as PgClient;
  return client.query({ ...statement, values });
}

/**
 * An ordinary statement error reported by PostgreSQL, after which the connection is still
 * usable — as opposed to a lost connection or a FATAL error that ended the session.
 */
function isServerError(error: unknown): boolean {
  return (error as { severity?: unknown } | null)?.severity === 'ERROR';
}
