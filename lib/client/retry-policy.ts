/** When an answer is worth another attempt, and how long to wait before it. */

/** The 409 code that means "the first request with this key is still running": worth waiting. */
const KEY_IN_USE = 'idempotency_key_in_use';

/**
 * Whether an answer is worth another attempt with the same key: 408, 429, a 5xx (but 501 and
 * 505, which no retry changes), and a 409 whose code is `idempotency_key_in_use` (problem+json
 * `code`, or `error.code` in a Stripe-style body made with the server's `errorBody`). Every
 * other answer is final — 2xx, 400, 402, 404, 422, another 409 (an abandoned operation, the
 * application's own conflict) — and is returned as it is.
 *
 * @param status - the answer's status
 * @param body - its parsed body
 */
export function isRetryableAnswer(status: number, body: unknown): boolean {
  if (status === 408 || status === 429) return true;
  if (status === 409) {
    const { code, error } = (body ?? {}) as { code?: unknown; error?: { code?: unknown } };
    return (code ?? error?.code) === KEY_IN_USE;
  }
  return status >= 500 && status <= 599 && status !== 501 && status !== 505;
}

/**
 * A `Retry-After` header in milliseconds: delay-seconds (`3`) or an HTTP date, counted from
 * `now`.
 * @returns the wait (0 for a date in the past), or `undefined` when absent or unreadable
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/^[A-Za-z]{3},/.test(text)) return undefined; // an HTTP date starts with its day name
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * The backoff ceiling before retry `retry` (1 for the first): `base × 2^(retry-1)`, at most `max`.
 */
export function backoffCeiling(retry: number, base: number, max: number): number {
  return Math.min(max, base * 2 ** Math.min(retry - 1, 30));
}

/**
 * A wait drawn uniformly in `[0, ceiling)` ("full jitter", AWS Architecture Blog, "Exponential
 * Backoff And Jitter"): clients that failed together spread out instead of retrying in waves.
 */
export function fullJitter(ceiling: number, random: () => number): number {
  return Math.floor(random() * ceiling);
}
