import type { DataSource } from 'typeorm';
import { prepareStatement } from './prepared-statement';
import { runOnNewQueryRunner } from './query-runner-statements';
import { Deadline } from './with-deadline';

/** The PostgreSQL backend a transaction runs on, and when the transaction began. */
export interface TransactionBackend {
  pid: number;
  began: string;
}

/** A timestamp as text to the microsecond, whatever the session's `DateStyle` and `TimeZone`. */
function instantOf(timestamp: string): string {
  return `to_char(${timestamp} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`;
}

/** Names the backend of the transaction it runs in, should that backend have to be ended. */
export const IDENTIFY_BACKEND = prepareStatement(
  `SELECT pg_backend_pid() AS pid, ${instantOf('now()')} AS began`,
);

/** Only while that backend is still in that transaction: never a backend that took its pid since. */
const END_BACKEND = prepareStatement(`
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
   WHERE pid = $1::int AND ${instantOf('xact_start')} = $2`);

/**
 * Ends the backend of an abandoned transaction from another connection, once its own connection
 * is closed. PostgreSQL notices a closed socket only when it next reads or writes it: a
 * statement still running (a handler's `pg_sleep`, a long query) would run on, and keep the
 * transaction's row locks, until it returned. Should this fail or find nothing (no connection in
 * time, a role not allowed to end the backend, `track_activities` off), the backend ends with
 * its statement, as it would without it.
 */
export async function endBackend(
  dataSource: DataSource,
  backend: TransactionBackend,
  timeoutMs: number,
): Promise<void> {
  const deadline = new Deadline('end abandoned backend', timeoutMs);
  await runOnNewQueryRunner(dataSource, END_BACKEND, [backend.pid, backend.began], deadline).catch(
    () => undefined,
  );
}
