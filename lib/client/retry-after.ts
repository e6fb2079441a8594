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
