/** The one place the TypeORM store's defaults live. The README's table is tested against it. */
export const DEFAULT_TYPEORM_STORE_OPTIONS = Object.freeze({
  /** The record table; its jobs live in `idempotency_records_jobs`. */
  tableName: 'idempotency_records',
  /** How long one store call on the request path may take. */
  timeoutSeconds: 5,
  /** Statements are sent as named prepared statements. */
  preparedStatements: true,
  /** Waiters on other instances are woken by `LISTEN/NOTIFY` where it works, else they poll. */
  wakeUps: 'auto' as 'auto' | 'poll',
});
