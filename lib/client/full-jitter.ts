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
