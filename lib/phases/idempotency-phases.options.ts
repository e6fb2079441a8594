/**
 * Settings of `IdempotencyPhasesModule`, resolved: operations in phases (shared by requests,
 * retries and the completer), the completer and the staged-job drainer.
 */
export interface ResolvedIdempotencyPhasesOptions {
  /**
   * The oldest an unfinished operation may be and still be resumed, by a retry or the completer.
   * Keep it below your providers' idempotency-key retention (Stripe keeps keys 24 h): an older
   * one is marked `abandoned` for a human, never completed blindly. Accepted: 1 to 31536000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.maxAgeSeconds` (43200, 12 h)
   */
  maxAgeSeconds: number;
  /**
   * How many times a local step runs when PostgreSQL aborts it with a serialization failure or
   * a deadlock (40001, 40P01), with jitter in between. Accepted: whole numbers from 1 to 100.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.localStepAttempts` (5)
   */
  localStepAttempts: number;
  /**
   * Lease a foreign step must have left beyond its own timeout before it starts. Accepted:
   * 0 to 3600.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.foreignStepMarginSeconds` (2)
   */
  foreignStepMarginSeconds: number;
  /**
   * The completer's schedule and thresholds.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.completer` (every 30 s, after 60 s, 10 at a time)
   */
  completer: IdempotencyCompleterOptions;
  /**
   * The staged-job drainer's schedule, handler timeout and retries.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs` (every 1 s, up to 30 s when idle, 60 s
   *   per handler, 10 attempts)
   */
  jobs: IdempotencyJobsOptions;
}

/** Settings of the completer, which finishes operations their clients gave up on. */
export interface IdempotencyCompleterOptions {
  /**
   * Whether the completer runs on a schedule (only when an `@IdempotentOperation()` exists).
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.completer.enabled` (true)
   */
  enabled: boolean;
  /**
   * Seconds between two completer runs. Accepted: 0.1 to 2147483.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.completer.intervalSeconds` (30)
   */
  intervalSeconds: number;
  /**
   * How long an unfinished operation whose lease lapsed waits, counted from its last run, before
   * the completer takes it over (a client's own retry comes first). Accepted: 0 to 31536000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.completer.afterSeconds` (60)
   */
  afterSeconds: number;
  /**
   * Records taken per run. Accepted: whole numbers from 1 to 10000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.completer.batchSize` (10)
   */
  batchSize: number;
}

/** Settings of the staged-job drainer. */
export interface IdempotencyJobsOptions {
  /**
   * Whether the drainer runs on a schedule (only when an `@IdempotentJobHandler()` exists).
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.enabled` (true)
   */
  enabled: boolean;
  /**
   * Seconds between two drains while there is work (a drain goes on until no job is due). An
   * idle drainer polls less often, see `maxIdleIntervalSeconds`. Accepted: 0.1 to 2147483.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.intervalSeconds` (1)
   */
  intervalSeconds: number;
  /**
   * The longest gap between two polls of an idle drainer: each poll that finds nothing doubles
   * the gap from `intervalSeconds` up to this, so an idle application costs the database about
   * one statement per this many seconds. A job staged by this process, or found due, brings the
   * drainer back to `intervalSeconds`; jobs staged elsewhere wait at most this long. Accepted:
   * 0.1 to 2147483 (not above `intervalSeconds`: no backoff).
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.maxIdleIntervalSeconds` (30)
   */
  maxIdleIntervalSeconds: number;
  /**
   * Due jobs looked up per query; each is then claimed and delivered in a transaction of its
   * own. Accepted: whole numbers from 1 to 10000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.batchSize` (20)
   */
  batchSize: number;
  /**
   * How long one delivery's handler may run. Past it, the handler's `AbortSignal` fires, its
   * transaction is ended by closing its connection (its writes roll back, its row lock goes) and
   * the delivery counts as failed. Accepted: 0.05 to 86400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.timeoutSeconds` (60)
   */
  timeoutSeconds: number;
  /**
   * Deliveries of one job before it is kept as dead (a delivery counts from the moment it is
   * claimed, so one that crashed or hung counts too). Accepted: whole numbers from 1 to 1000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.maxAttempts` (10)
   */
  maxAttempts: number;
  /**
   * Delay before the second delivery; it doubles per failure, with full jitter. Accepted: 0 to
   * 86400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.backoffSeconds` (1)
   */
  backoffSeconds: number;
  /**
   * The longest delay between two deliveries. Accepted: 0 to 86400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS.jobs.maxBackoffSeconds` (600)
   */
  maxBackoffSeconds: number;
}

/** What `IdempotencyPhasesModule.forRoot()` takes: any subset, merged over the defaults. */
export interface IdempotencyPhasesModuleOptions extends Partial<
  Omit<ResolvedIdempotencyPhasesOptions, 'completer' | 'jobs'>
> {
  /** Completer, merged over the defaults; `false` disables the schedule. */
  completer?: Partial<IdempotencyCompleterOptions> | false;
  /** Staged-job drainer, merged over the defaults; `false` disables the schedule. */
  jobs?: Partial<IdempotencyJobsOptions> | false;
}
