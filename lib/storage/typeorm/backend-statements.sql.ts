/** A timestamp as text to the microsecond, whatever the session's `DateStyle` and `TimeZone`. */
const instantOf = (timestamp: string): string =>
  `to_char(${timestamp} AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`;

/** The backend of the transaction it runs in, and when that transaction began. */
export const IDENTIFY_BACKEND_SQL = `SELECT pg_backend_pid() AS pid, ${instantOf('now()')} AS began`;

/** Only while that backend is still in that transaction: never a backend that took its pid since. */
export const END_BACKEND_SQL = `
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
   WHERE pid = $1::int AND ${instantOf('xact_start')} = $2`;
