/** Names of the chaos scenarios, in the order they run. */
export const SCENARIO_NAMES = ['storm', 'outage', 'tenancy', 'phases', 'scaleout'] as const;

/** One chaos scenario. */
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/**
 * The invariant counters every scenario reports; all must be zero for the scenario to pass.
 */
export interface InvariantCounts {
  /** Extra payments or provider charges beyond one per key, rows no key accounts for, and keys
   *  whose clients were told of two different first executions. */
  duplicates: number;
  /** Keys whose client got a final answer that is not what the key now replays, or whose
   *  payment / charge is missing or differs from the one the client was given. */
  lost: number;
  /** Keys left in flight after their lease lapsed, or that never got a final answer. */
  stuck: number;
  /** Cross-tenant leaks: another account's response, ids or key state seen or changed. */
  leaks: number;
  /** Other contract violations: 5xx that are not the expected ones, unexpected statuses,
   *  an app that died or did not recover. */
  failures: number;
}

/** What one scenario threw at the apps and what it found. */
export interface ScenarioResult extends InvariantCounts {
  scenario: ScenarioName;
  /** HTTP requests sent to the apps (load, retries and final checks). */
  requests: number;
  /** `kill -9`s or database outages inflicted, e.g. `20 kills`. */
  disruptions: string;
  /** Responses by status; `r201` is a replayed 201, `err` a transport error. */
  statuses: Record<string, number>;
  /** Handler executions: claims that won (the records' `attempts`, summed). */
  executions: number;
  /** Calls that reached the fake provider (its `provider_calls`, summed). */
  providerCalls: number;
  /** Payment rows in the scenario's database. */
  payments: number;
  /** Provider charge rows in the scenario's database. */
  charges: number;
  /** Receipt rows (written by the staged `send_receipt` job), for the scenarios that count them. */
  receipts?: number;
  /** Distinct idempotency keys (per account) the scenario used. */
  keys: number;
  durationMs: number;
  verdict: 'PASS' | 'FAIL';
  /** One line per violation (capped), with the evidence. */
  violations: string[];
  /** Scenario-specific facts (kill timings, outage window, recovery time). */
  details: Record<string, unknown>;
}

/** The whole run, as written to `test/chaos/results/latest.json`. */
export interface ChaosRunResult {
  startedAt: string;
  durationMs: number;
  mode: 'quick' | 'full';
  adapters: string[];
  database: string;
  scenarios: ScenarioResult[];
  verdict: 'PASS' | 'FAIL';
}
