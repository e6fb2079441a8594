/** Percentiles of a set of latencies, in milliseconds. */
export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * Collects latencies (milliseconds, fractional) and summarises them exactly (sorted, nearest
 * rank), so sub-millisecond differences survive.
 */
export class LatencyRecorder {
  private values: number[] = [];

  /** Adds one latency. */
  record(ms: number): void {
    this.values.push(ms);
  }

  /** How many latencies were recorded. */
  get count(): number {
    return this.values.length;
  }

  /** @returns percentiles of everything recorded (zeros when empty) */
  summary(): LatencySummary {
    return summarizeLatencies(this.values);
  }
}

/**
 * Nearest-rank percentiles of `values`.
 * @param values - latencies in milliseconds
 */
export function summarizeLatencies(values: readonly number[]): LatencySummary {
  if (values.length === 0) return { count: 0, p50: 0, p90: 0, p99: 0, max: 0, mean: 0 };
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)];
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    count: sorted.length,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[sorted.length - 1],
    mean: sum / sorted.length,
  };
}

/** The median of `values` (the mean of the two middle values when their count is even). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
