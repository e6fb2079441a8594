import { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';

/**
 * The ranges of the numeric options: what the library can honour, and what a refusal says.
 */

/** The range a numeric option must fall in, and what to say when it does not. */
export interface IdempotencyOptionLimit {
  /** Smallest accepted value (inclusive). */
  readonly min: number;
  /** Largest accepted value (inclusive). */
  readonly max: number;
  /** Whether only whole numbers are accepted. */
  readonly integer: boolean;
  /** What the number counts, as written in the message ("seconds", "bytes"...). */
  readonly unit: string;
  /** A good value, shown in the message: the option's default. */
  readonly example: number;
  /** Why the range is what it is, or another hint; appended to the message. */
  readonly note?: string;
}

/** Freezes a range. Internal. */
export function limit(spec: IdempotencyOptionLimit): IdempotencyOptionLimit {
  return Object.freeze(spec);
}

/**
 * The ranges the library can honour for each numeric option, checked at bootstrap (and at
 * decoration for route options). Internal: the messages and the tests read the bounds from here.
 */
export const OPTION_LIMITS = Object.freeze({
  ttlSeconds: limit({
    min: 0.1,
    max: 315_360_000,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.responses.ttlSeconds,
    note: 'At most 10 years, so PostgreSQL timestamps and JavaScript timers stay in range.',
  }),
  lockTimeoutSeconds: limit({
    min: 0.1,
    max: 86_400,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.execution.lockTimeoutSeconds,
    note:
      'The lease is renewed every third of it (never more often than every 20 ms), so a shorter ' +
      'one lapses before it can be renewed; values under 1 s are for tests.',
  }),
  maxLockHoldSeconds: limit({
    min: 0.1,
    max: 31_536_000,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.execution.maxLockHoldSeconds,
    note: 'At most 1 year.',
  }),
  retryAfterSeconds: limit({
    min: 0,
    max: 86_400,
    integer: true,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.errors.retryAfterSeconds,
  }),
  maxRequestBytes: limit({
    min: 1,
    max: 1_073_741_824,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.request.maxRequestBytes,
    note: 'At most 1 GiB.',
  }),
  maxResponseBytes: limit({
    min: 0,
    max: 1_073_741_824,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.responses.maxResponseBytes,
    note: 'At most 1 GiB, the most a PostgreSQL bytea value holds.',
  }),
  'purge.intervalSeconds': limit({
    min: 0.1,
    max: 2_147_483,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.purge.intervalSeconds,
    note:
      'Longer periods overflow setInterval (2^31-1 ms), which then fires every millisecond; ' +
      'purge: false turns the schedule off.',
  }),
  'purge.batchSize': limit({
    min: 1,
    max: 100_000,
    integer: true,
    unit: 'rows',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.purge.batchSize,
  }),
  'purge.abandonedRetentionSeconds': limit({
    min: 1,
    max: 315_360_000,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.purge.abandonedRetentionSeconds,
  }),
  'replayCache.maxEntries': limit({
    min: 1,
    max: 10_000_000,
    integer: true,
    unit: 'entries',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxEntries,
    note: 'replayCache: false turns the cache off.',
  }),
  'wait.maxSeconds': limit({
    min: 0,
    max: 300,
    integer: false,
    unit: 'seconds',
    example: 10,
    note: 'A waiting request holds its connection (and, behind a proxy, a worker): keep it short.',
  }),
  'wait.defaultSeconds': limit({
    min: 0,
    max: 300,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.wait.defaultSeconds,
    note: 'It is capped by wait.maxSeconds.',
  }),
  'wait.pollIntervalSeconds': limit({
    min: 0.05,
    max: 60,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.wait.pollIntervalSeconds,
  }),
  maxWaiters: limit({
    min: 1,
    max: 1_000_000,
    integer: true,
    unit: 'requests',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.wait.maxWaiters,
  }),
  'replayCache.maxBytes': limit({
    min: 1,
    max: 4 * 1024 ** 3,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxBytes,
    note: 'At most 4 GiB; replayCache: false turns the cache off.',
  }),
});

/** A numeric option with a range in `OPTION_LIMITS`. */
export type IdempotencyLimitedOption = keyof typeof OPTION_LIMITS;
