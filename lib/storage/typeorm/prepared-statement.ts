import { createHash } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';
import { watchCommitWarnings } from './commit-warnings';
import type { Deadline } from './with-deadline';

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

/** A statement as node-postgres sends it. */
interface PgQueryConfig {
  name?: string;
  text: string;
  values: unknown[];
}

/** The part of a node-postgres client the store uses. */
export interface PgClient {
  query(config: PgQueryConfig): Promise<StatementResult>;
  query(
    config: PgQueryConfig,
    callback: (error: Error | null, result: StatementResult) => void,
  ): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  removeListener(event: 'error', listener: (error: Error) => void): unknown;
}

/** A pg-pool, as far as the request path uses it: a connection lent to a callback. */
interface PgPool {
  connect(
    callback: (
      error: Error | undefined,
      client: PgClient,
      release: (error?: unknown) => void,
    ) => void,
  ): void;
}

/** The pg pool of TypeORM's PostgreSQL driver (its public `master`), once it is initialised. */
export function poolOf(dataSource: DataSource): PgPool | undefined {
  return (dataSource.driver as unknown as { master?: PgPool } | undefined)?.master;
}

/**
 * Names a statement after a hash of its text, so two tables (or two versions of the library)
 * never share a prepared statement on one connection.
 */
export function prepareStatement(text: string): PreparedStatement {
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return { name: `nest_idempotency_${digest}`, text };
}

/** Each statement of a set prepared (`prepareStatement`), under the same names. */
export function prepareStatements<K extends string>(
  texts: Record<K, string>,
): Record<K, PreparedStatement> {
  return Object.fromEntries(
    Object.entries<string>(texts).map(([name, text]) => [name, prepareStatement(text)]),
  ) as Record<K, PreparedStatement>;
}

/**
 * Whether the DataSource's driver has a pg pool to borrow from: TypeORM's PostgreSQL driver
 * declares it public (`master`, the pg `Pool`, whose `connect()` is pg's public API). Otherwise
 * (a driver without one) the store runs its statements through query runners.
 */
export function hasPoolAccess(dataSource: DataSource): boolean {
  const type = dataSource.driver?.options?.type;
  return type === 'postgres' && typeof poolOf(dataSource)?.connect === 'function';
}

/**
 * Runs a prepared statement on a connection of the DataSource's pool and gives the connection
 * back, all within `deadline`. A connection that failed underneath (the server went away) or
 * whose statement ran out of time is handed back with the error, so the pool closes it instead
 * of lending it out again; one that arrives after the deadline is given back at once.
 * Call only when `hasPoolAccess(dataSource)` holds.
 *
 * This is the request path's one statement helper, so it is written as one promise with one
 * timer for the wait for a connection and the statement together (not a race per step), and it
 * borrows the connection and sends the statement with pg's callbacks: TypeORM's query runners
 * and pg's promise API would add six promises per statement.
 *
 * @param prepared - send it as a named prepared statement (else unnamed: parsed and planned on
 *   every call, but safe where connections share server sessions, as behind PgBouncer's
 *   transaction pooling before 1.21)
 * @param read - what the caller wants of the result, taken before the promise settles (one
 *   promise fewer than a `then()` behind it, once the connection is back); a throw rejects, a
 *   promise is followed
 * @param options - whether its commit is confirmed, and what becomes of it when it fails
 */
export function runOnPool<T = StatementResult>(
  dataSource: DataSource,
  statement: PreparedStatement,
  values: unknown[],
  deadline: Deadline,
  prepared = true,
  read?: (result: StatementResult) => T | PromiseLike<T>,
  options: StatementOptions<T> = PLAIN_STATEMENT,
): Promise<T> {
  const pool = poolOf(dataSource);
  // TypeORM's own words for a DataSource not initialised (or destroyed).
  if (!pool) return Promise.reject(new Error('Driver not Connected'));
  return new Promise<T>((resolve, reject) => {
    let client: PgClient | undefined;
    let release: ((error?: unknown) => void) | undefined;
    let broken: unknown;
    let endWatch: (() => Error | undefined) | undefined;
    let unconfirmed: Error | undefined;
    // A checked-out pg client has no error listener of its own: without this one, a connection
    // dropped by the server between two queries would crash the process.
    const onError = (error: Error) => (broken = error);
    const giveBack = () => {
      client!.removeListener('error', onError);
      unconfirmed = endWatch?.();
      release!(broken);
    };
    // Settles a statement that failed: with what `recover` makes of it, else with its error.
    const settleFailed = (error: unknown) => {
      const recovered = options.recover?.(error, values);
      if (recovered) resolve(recovered);
      else reject(error);
    };
    const timer = deadline.startTimer((timeout) => {
      // After a timeout the statement is still pending on this connection (or lost in a dead
      // socket): pg-pool, given an error, ends the client, which destroys the socket because a
      // query is active. Handed back without one, the next caller would queue behind it.
      if (client) {
        broken = timeout;
        giveBack();
      }
      reject(timeout);
    });
    pool.connect((connectError, lent, releaseLent) => {
      if (connectError) {
        if (timer.stop()) settleFailed(connectError);
        return;
      }
      if (timer.done) return releaseLent();
      client = lent;
      release = releaseLent;
      timer.waitingFor = 'PostgreSQL to answer';
      lent.on('error', onError);
      if (options.confirmed) endWatch = watchCommitWarnings(lent, deadline.operation);
      const query = callOf(statement, values, prepared);
      const failed = (error: unknown) => {
        if (!timer.stop()) return;
        if (!isServerError(error)) broken = error;
        giveBack();
        const cause = prepared ? explainStatementError(error, statement) : error;
        settleFailed(cause);
      };
      try {
        lent.query(query, (error, result) => {
          if (error) return failed(error);
          if (!timer.stop()) return;
          giveBack();
          if (unconfirmed) return reject(unconfirmed);
          try {
            resolve(read ? read(result) : (result as T));
          } catch (readError) {
            reject(readError);
          }
        });
      } catch (error) {
        // A query pg refuses outright (as the old awaited call caught): the connection goes back.
        failed(error);
      }
    });
  });
}

/**
 * What a caller of `runOnPool` does when its statement failed: a promise to settle with
 * instead, or undefined to reject with `error`.
 */
export type StatementRecovery<T> = (error: unknown, values: unknown[]) => Promise<T> | undefined;

/** How `runOnPool` treats a statement's commit and its failure. */
export interface StatementOptions<T> {
  /**
   * The statement's commit makes an answer final: a WARNING during it rejects with
   * `IdempotencyCommitUnconfirmedError` (see `watchCommitWarnings`).
   */
  readonly confirmed?: boolean;
  /**
   * Given the error of a statement that failed (not one that ran out of time), with its values:
   * a promise to settle with instead, or undefined to reject (no `catch()` behind the call on the
   * way that succeeds).
   */
  readonly recover?: StatementRecovery<T>;
}

/** A statement whose commit is not confirmed and whose failure rejects. */
const PLAIN_STATEMENT: StatementOptions<never> = {};

/** A statement whose commit makes an answer final, and whose failure rejects. */
export const CONFIRMED: StatementOptions<never> = { confirmed: true };

/**
 * One call of a statement as pg is given it: its name and text inherited from the statement,
 * its values its own. pg copies every query config it is given, property by property; a config
 * with one own property is copied in about half the time of an object literal with three.
 */
function callOf(statement: PreparedStatement, values: unknown[], prepared: boolean): PgQueryConfig {
  const call = Object.create(prepared ? statement : { text: statement.text }) as PgQueryConfig;
  call.values = values;
  return call;
}

/**
 * An ordinary statement error reported by PostgreSQL, after which the connection is still
 * usable — as opposed to a lost connection or a FATAL error that ended the session.
 */
function isServerError(error: unknown): boolean {
  return (error as { severity?: unknown } | null)?.severity === 'ERROR';
}

/**
 * The error a named statement met, or, when PostgreSQL says the statement already exists
 * (42P05) or does not exist (26000) on a connection, the configuration error that says why and
 * names the fix (`typeOrmStore({ preparedStatements: false })`).
 */
export function explainStatementError(error: unknown, statement: PreparedStatement): unknown {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const lost =
    (code === '42P05' || code === '26000') &&
    typeof message === 'string' &&
    message.includes(statement.name);
  return lost ? IdempotencyConfigurationError.preparedStatementsUnsupported(message) : error;
}
