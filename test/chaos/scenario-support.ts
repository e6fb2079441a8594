import type { AppCluster } from './app-cluster';
import type { ChaosClient, Exchange } from './chaos-client';
import { statusLabel } from './chaos-client';
import type { ChaosDatabase } from './chaos-database';
import type { ChaosOptions } from './chaos-options';
import type { ScenarioName, ScenarioResult } from './chaos-result';
import type { KeyPlan } from './key-plan';
import { verifyKeys } from './verify-keys';
import type { Verification } from './verify-keys';

/** What every scenario gets from the runner. */
export interface ScenarioContext {
  options: ChaosOptions;
  /** The scenario's own, empty database. */
  db: ChaosDatabase;
  /** Short unique tag of the run, used in keys and account ids. */
  tag: string;
  /** Progress line on stderr. */
  log(line: string): void;
}

/** A scenario: throws its load at fresh app processes and reports what it found. */
export type Scenario = (context: ScenarioContext) => Promise<ScenarioResult>;

/**
 * Environment of the sample app processes of a scenario: its database, a short lease so the run
 * is fast, and the purge kept out of the way.
 */
export function appEnv(
  context: ScenarioContext,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    DATABASE_URL: context.db.url,
    IDEMPOTENCY_LOCK_TIMEOUT_SECONDS: String(context.options.leaseSeconds),
    IDEMPOTENCY_TTL_SECONDS: '3600',
    IDEMPOTENCY_PURGE_INTERVAL_SECONDS: '30',
    PROVIDER_LATENCY_MS: '0',
    ...extra,
  };
}

/** Responses by label (`201`, `r201`, `409`, `err`…), most frequent first. */
export function tallyStatuses(exchanges: readonly Exchange[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const exchange of exchanges) {
    const label = statusLabel(exchange);
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]));
}

/** Random integer in [min, max]. */
export function randomInt(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Builds a scenario's result from its verification and what it did; the verdict is PASS only
 * when every counter is zero.
 */
export function buildResult(input: {
  scenario: ScenarioName;
  startedAt: number;
  exchanges: readonly Exchange[];
  verification: Verification;
  cluster: AppCluster;
  keys: number;
  disruptions: string;
  details?: Record<string, unknown>;
  /** Receipt rows, for a scenario that counts them. */
  receipts?: number;
  /** Scenario-specific violations on top of the verification's. */
  extra?: {
    leaks?: string[];
    failures?: string[];
    duplicates?: string[];
    lost?: string[];
    stuck?: string[];
  };
}): ScenarioResult {
  const { verification, cluster } = input;
  const leaks = input.extra?.leaks ?? [];
  const duplicates = input.extra?.duplicates ?? [];
  const lost = input.extra?.lost ?? [];
  const stuck = input.extra?.stuck ?? [];
  const failures = [...(input.extra?.failures ?? []), ...cluster.unexpectedExits];
  const result: ScenarioResult = {
    scenario: input.scenario,
    requests: input.exchanges.length,
    disruptions: input.disruptions,
    statuses: tallyStatuses(input.exchanges),
    executions: verification.executions,
    providerCalls: verification.providerCalls,
    payments: verification.payments,
    charges: verification.charges,
    ...(input.receipts === undefined ? {} : { receipts: input.receipts }),
    keys: input.keys,
    duplicates: verification.duplicates + duplicates.length,
    lost: verification.lost + lost.length,
    stuck: verification.stuck + stuck.length,
    leaks: verification.leaks + leaks.length,
    failures: verification.failures + failures.length,
    durationMs: Date.now() - input.startedAt,
    verdict: 'PASS',
    violations: [
      ...duplicates.map((line) => `duplicate: ${line}`),
      ...lost.map((line) => `lost ${line}`),
      ...stuck.map((line) => `stuck ${line}`),
      ...leaks.map((line) => `leak: ${line}`),
      ...failures.map((line) => `failure: ${line}`),
      ...verification.violations,
    ],
    details: { ...input.details },
  };
  const unhandled = cluster.unhandledErrors();
  if (unhandled.length > 0) {
    result.details.unhandledAppErrors = unhandled;
    result.violations.push(...unhandled.slice(0, 5).map((line) => `app log: ${line}`));
  }
  const bad = result.duplicates + result.lost + result.stuck + result.leaks + result.failures;
  result.verdict = bad === 0 ? 'PASS' : 'FAIL';
  return result;
}

/**
 * Ends a scenario once its load is over: verifies its keys against the database and the
 * responses its clients got, and builds its result.
 */
export async function finishScenario(
  context: ScenarioContext,
  input: {
    scenario: ScenarioName;
    startedAt: number;
    client: ChaosClient;
    cluster: AppCluster;
    plans: KeyPlan[];
    /** Transport errors are expected (processes were killed). */
    allowTransportErrors?: boolean;
    /** 503s saying the database is down are expected (it was made unreachable). */
    allowStoreUnavailable?: boolean;
    disruptions: string;
    details?: Record<string, unknown>;
    extra?: { leaks?: string[]; failures?: string[]; duplicates?: string[] };
  },
): Promise<ScenarioResult> {
  context.log(`${input.scenario}: load over, verifying`);
  const verification = await verifyKeys({
    db: context.db,
    client: input.client,
    cluster: input.cluster,
    plans: input.plans,
    leaseSeconds: context.options.leaseSeconds,
    allowTransportErrors: input.allowTransportErrors ?? false,
    allowStoreUnavailable: input.allowStoreUnavailable ?? false,
  });
  return buildResult({
    scenario: input.scenario,
    startedAt: input.startedAt,
    exchanges: input.client.exchanges,
    verification,
    cluster: input.cluster,
    keys: input.plans.length,
    disruptions: input.disruptions,
    details: input.details,
    extra: input.extra,
  });
}
