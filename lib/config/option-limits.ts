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

/** A range of seconds, fractions accepted. Internal. */
export function seconds(min: number, max: number, example: number, note?: string) {
  return Object.freeze({ min, max, integer: false, unit: 'seconds', example, note });
}

/** A range of whole `unit`s. Internal. */
export function count(min: number, max: number, unit: string, example: number, note?: string) {
  return Object.freeze({ min, max, integer: true, unit, example, note });
}

const { request, execution, wait, responses, errors, purge, replayCache } =
  DEFAULT_IDEMPOTENCY_OPTIONS;
const GIB = 1024 ** 3;
const CACHE_OFF = 'replayCache: false turns the cache off.';

/**
 * The ranges the library can honour for each numeric option, checked at bootstrap (and at
 * decoration for route options). Internal: the messages and the tests read the bounds from here.
 */
export const OPTION_LIMITS = Object.freeze({
  ttlSeconds: seconds(
    0.1,
    315_360_000,
    responses.ttlSeconds,
    'At most 10 years, so PostgreSQL timestamps and JavaScript timers stay in range.',
  ),
  lockTimeoutSeconds: seconds(
    0.1,
    86_400,
    execution.lockTimeoutSeconds,
    'The lease is renewed every third of it (never more often than every 20 ms), so a shorter ' +
      'one lapses before it can be renewed; values under 1 s are for tests.',
  ),
  maxLockHoldSeconds: seconds(0.1, 31_536_000, execution.maxLockHoldSeconds, 'At most 1 year.'),
  retryAfterSeconds: count(0, 86_400, 'seconds', errors.retryAfterSeconds),
  maxRequestBytes: count(1, GIB, 'bytes', request.maxRequestBytes, 'At most 1 GiB.'),
  maxResponseBytes: count(
    0,
    GIB,
    'bytes',
    responses.maxResponseBytes,
    'At most 1 GiB, the most a PostgreSQL bytea value holds.',
  ),
  'purge.intervalSeconds': seconds(
    0.1,
    2_147_483,
    purge.intervalSeconds,
    'Longer periods overflow setInterval (2^31-1 ms), which then fires every millisecond; ' +
      'purge: false turns the schedule off.',
  ),
  'purge.batchSize': count(1, 100_000, 'rows', purge.batchSize),
  'purge.abandonedRetentionSeconds': seconds(1, 315_360_000, purge.abandonedRetentionSeconds),
  'replayCache.maxEntries': count(1, 10_000_000, 'entries', replayCache.maxEntries, CACHE_OFF),
  'wait.maxSeconds': seconds(
    0,
    300,
    10,
    'A waiting request holds its connection (and, behind a proxy, a worker): keep it short.',
  ),
  'wait.defaultSeconds': seconds(0, 300, wait.defaultSeconds, 'It is capped by wait.maxSeconds.'),
  'wait.pollIntervalSeconds': seconds(0.05, 60, wait.pollIntervalSeconds),
  maxWaiters: count(1, 1_000_000, 'requests', wait.maxWaiters),
  'replayCache.maxBytes': count(
    1,
    4 * GIB,
    'bytes',
    replayCache.maxBytes,
    `At most 4 GiB; ${CACHE_OFF}`,
  ),
});

/** A numeric option with a range in `OPTION_LIMITS`. */
export type IdempotencyLimitedOption = keyof typeof OPTION_LIMITS;
