import { isCommitUnconfirmed } from '../commit-unconfirmed.error';
import { isStoreTimeout } from './with-deadline';

/** SQLSTATEs PostgreSQL sends when it is going away or not taking connections. */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** TypeORM's error for a query on a runner it released (its connection failed). */
const RELEASED_RUNNER_ERRORS = new Set([
  'QueryRunnerAlreadyReleasedError',
  'QueryRunnerProviderAlreadyReleasedError',
]);
/**
 * node-postgres's own messages for a connection that is gone: cut ("Connection terminated…"),
 * a full pool that cannot connect, and a client queried after its connection failed or was closed
 * under it ("Client has encountered a connection error and is not queryable", seen in the chaos
 * outage scenario when the connections were cut between two queries of one request).
 */
const UNAVAILABLE_MESSAGES =
  /^Connection terminated|timeout exceeded when trying to connect|^Client (has encountered a connection error|was closed) and is not queryable/;
/** Socket errors of a server that is down or restarting. */
const UNAVAILABLE_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

/**
 * Whether an error means the database could not be reached (down, restarting, refusing
 * connections, or the connection was cut), as opposed to a failed statement. TypeORM wraps
 * driver errors in `QueryFailedError.driverError`; node-postgres reports a cut connection as
 * "Connection terminated…", a query on a client whose connection failed as "…is not queryable"
 * and a full pool as "timeout exceeded when trying to connect"; TypeORM
 * reports a query on a runner it released after its connection failed as
 * `QueryRunnerAlreadyReleasedError`; a store call that ran out of time
 * (`IdempotencyStoreTimeoutError`) counts too, and so does a commit its synchronous standby did
 * not confirm (`IdempotencyCommitUnconfirmedError`): it stands, but is no final answer yet.
 *
 * The library answers a step of an operation in phases that failed this way with 503
 * `idempotency_store_unavailable`; an application can use it to do the same for its own routes.
 *
 * @param error - what a query, a TypeORM call or a store call threw
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (isStoreTimeout(error) || isCommitUnconfirmed(error)) return true;
  const candidates = [error, (error as { driverError?: unknown } | null)?.driverError];
  return candidates.some((candidate) => {
    // Not `instanceof Error`: a socket's errors come from Node's own realm, which is not the
    // application's under a VM sandbox (Jest's), and "read ECONNRESET" was not recognised there.
    if (typeof candidate !== 'object' || candidate === null) return false;
    const { code, severity, name, message } = candidate as Partial<Record<string, unknown>>;
    // TypeORM releases a query runner whose connection failed: the next query of the step on it
    // (a transaction in progress) reports that, not the connection error.
    // (`QueryRunnerProviderAlreadyReleasedError` in TypeORM 0.3, `QueryRunnerAlreadyReleasedError`
    // in 1.x.)
    if (typeof name === 'string' && RELEASED_RUNNER_ERRORS.has(name)) return true;
    if (typeof code === 'string') {
      if (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code)) return true;
      if (UNAVAILABLE_SOCKET_CODES.has(code)) return true;
    }
    // A FATAL at connect time ("database … is not currently accepting connections").
    if (severity === 'FATAL') return true;
    return typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message);
  });
}
