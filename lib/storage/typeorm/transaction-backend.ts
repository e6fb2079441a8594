import type { DataSource } from 'typeorm';
import { END_BACKEND_SQL, IDENTIFY_BACKEND_SQL } from './backend-statements.sql';
import { prepareStatement } from './prepared-statement';
import { runOnNewQueryRunner } from './query-runner-statements';
import { Deadline } from './with-deadline';

/** The PostgreSQL backend a transaction runs on, and when the transaction began. */
export interface TransactionBackend {
  pid: number;
  began: string;
}

/** Names the backend of the transaction it runs in, should that backend have to be ended. */
export const IDENTIFY_BACKEND = prepareStatement(IDENTIFY_BACKEND_SQL);

const END_BACKEND = prepareStatement(END_BACKEND_SQL);

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
  const values = [backend.pid, backend.began];
  await runOnNewQueryRunner(dataSource, END_BACKEND, values, deadline).catch(() => undefined);
}
