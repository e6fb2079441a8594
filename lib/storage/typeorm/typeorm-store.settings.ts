import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';

/** The longest a timer can wait in Node.js (about 24.8 days). */
const MAX_TIMER_MS = 2_147_483_647;

/** Tuning of the TypeORM store. */
export interface TypeOrmIdempotencyStoreSettings {
  /**
   * How long one store call (claim, complete, release, renew, purgeExpired, beginTransaction,
   * and a transaction's complete, commit and rollback) may take, counting the wait for a pooled
   * connection, before it rejects with `IdempotencyStoreTimeoutError`. The module passes
   * `timeoutSeconds * 1000`.
   * @defaultValue 5000
   */
  timeoutMs: number;
  /**
   * Send the store's statements as named prepared statements (parsed and planned once per
   * connection). `false` sends them unnamed, for connections that do not keep their own server
   * session: PgBouncer in transaction pooling mode before 1.21, or an embedded PGlite served to
   * several connections. The module passes its `preparedStatements` option.
   * @defaultValue true
   */
  preparedStatements?: boolean;
  /**
   * How waiters (`wait`) on other instances learn that a record settled: `'auto'` listens on a
   * dedicated connection (`LISTEN/NOTIFY`) unless a self-test shows notifications cannot reach
   * it (PgBouncer in transaction pooling mode), then they poll; `'poll'` never listens.
   * `typeOrmStore()` passes its `wakeUps` option.
   * @defaultValue 'auto'
   */
  wakeUps?: 'auto' | 'poll';
}

/**
 * The time each call of the store may take, checked.
 * @throws IdempotencyConfigurationError when `settings.timeoutMs` is not a positive number of
 *   milliseconds a Node.js timer can wait
 */
export function timeoutMsOf(settings: TypeOrmIdempotencyStoreSettings): number {
  const { timeoutMs } = settings;
  if (typeof timeoutMs !== 'number' || !(timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS)) {
    throw IdempotencyConfigurationError.invalidOption(
      'timeoutMs',
      timeoutMs,
      `Use a number of milliseconds from 1 to ${MAX_TIMER_MS}, e.g. 5000.`,
    );
  }
  return timeoutMs;
}
