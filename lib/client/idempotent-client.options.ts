/**
 * Options of `createIdempotentClient()`. Every field but `baseUrl` has a default
 * (`DEFAULT_IDEMPOTENT_CLIENT_OPTIONS`).
 */
export interface IdempotentClientOptions {
  /** Where the API is, e.g. `https://api.example.com`; request paths are resolved against it. */
  baseUrl: string | URL;
  /**
   * How many times a request may be retried after its first attempt (so `retries + 1` attempts
   * at most).
   * @defaultValue 5
   */
  retries?: number;
  /**
   * How long one attempt may take, response body included, before it is given up and retried.
   * @defaultValue 30_000
   */
  attemptTimeoutMs?: number;
  /**
   * How long a whole operation may take, waits and every attempt included. Past it the client
   * stops: it returns the last retryable answer it has, or throws `IdempotentRequestError`.
   * @defaultValue 120_000
   */
  deadlineMs?: number;
  /**
   * First backoff ceiling: the wait before retry `n` is a uniformly random time between 0 and
   * `min(maxBackoffMs, backoffMs × 2^(n-1))` ("full jitter").
   * @defaultValue 250
   */
  backoffMs?: number;
  /** The backoff ceiling stops growing here. @defaultValue 20_000 */
  maxBackoffMs?: number;
  /**
   * The longest `Retry-After` the client waits for; a longer one ends the operation with that
   * answer (the server asked for more patience than this client has).
   * @defaultValue 60_000
   */
  maxRetryAfterMs?: number;
  /** The request header that carries the key. @defaultValue `'Idempotency-Key'` */
  keyHeader?: string;
  /** The response header that marks a replay. @defaultValue `'Idempotent-Replayed'` */
  replayedHeader?: string;
  /** Headers sent with every request (an `Authorization`, say). */
  headers?: Record<string, string>;
  /** New keys: a UUID v4 (`crypto.randomUUID()`) unless replaced. */
  generateKey?: () => string;
  /** The `fetch` to use: the global one unless replaced (a mock, an instrumented one). */
  fetch?: typeof fetch;
  /** Random numbers in [0, 1) for the jitter: `Math.random` unless replaced (tests). */
  random?: () => number;
  /** Called before each wait between attempts: for logs and metrics. */
  onRetry?: (retry: IdempotentRetry) => void;
}

/** What `onRetry` is told about a retry about to be made. */
export interface IdempotentRetry {
  /** The key the operation uses on every attempt. */
  idempotencyKey: string;
  /** The attempt that just failed (1 for the first). */
  attempt: number;
  /** The wait before the next attempt. */
  delayMs: number;
  /** Whether the wait is the server's `Retry-After` (else backoff with jitter). */
  retryAfter: boolean;
  /** The ceiling the jittered wait was drawn under (`0` when `retryAfter`). */
  backoffCeilingMs: number;
  /** Why: `status` (a retryable answer), `network` (no answer) or `timeout` (the attempt's). */
  reason: 'status' | 'network' | 'timeout';
  /** The retryable answer's status, for `reason: 'status'`. */
  status?: number;
  /** The error, for `network` and `timeout`. */
  error?: unknown;
}

/** The defaults of every optional field of `IdempotentClientOptions`. */
export const DEFAULT_IDEMPOTENT_CLIENT_OPTIONS = Object.freeze({
  /** Retries after the first attempt. */
  retries: 5,
  /** One attempt's time, in milliseconds. */
  attemptTimeoutMs: 30_000,
  /** The whole operation's time, in milliseconds. */
  deadlineMs: 120_000,
  /** First backoff ceiling, in milliseconds. */
  backoffMs: 250,
  /** Largest backoff ceiling, in milliseconds. */
  maxBackoffMs: 20_000,
  /** Longest `Retry-After` waited for, in milliseconds. */
  maxRetryAfterMs: 60_000,
  /** The request header that carries the key. */
  keyHeader: 'Idempotency-Key',
  /** The response header that marks a replay. */
  replayedHeader: 'Idempotent-Replayed',
});
