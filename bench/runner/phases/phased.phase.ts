import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchDatabase, SessionStates } from '../bench-database';
import type { CpuPerRequest } from '../cpu-usage';
import { cpuPerRequest, cpuSnapshot, medianCpu } from '../cpu-usage';
import type { LatencySummary } from '../latency-stats';
import type { LoadResult, LoadSpec } from '../load';
import { runLoad } from '../load';
import type { BenchServer } from '../server-process';
import { BENCH_BODY, ROUTES } from './bench-routes';

/** Settings of the phases comparison. */
export interface PhasedSettings {
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  rounds: number;
  /** Provider latencies to compare the two routes at, in milliseconds. */
  providerLatenciesMs: number[];
  /** The server's pool size (the transactional route needs more than `connections`). */
  poolSize: number;
}

/** How the payment is written. */
export type PaymentStyle = 'transactional' | 'phased';

/** Sessions `idle in transaction` (and `active`) seen by the sampler during a measured run. */
export interface SessionSummary {
  /** Samples taken (one every `SAMPLE_INTERVAL_MS`, while the load ran). */
  samples: number;
  idleInTransactionPeak: number;
  idleInTransactionMean: number;
  /**
   * The longest a session had been idle in transaction, over all samples, and the median over
   * samples of each sample's longest (0 in a sample with none), in milliseconds.
   */
  longestIdleInTransactionMs: number;
  medianLongestIdleInTransactionMs: number;
  activePeak: number;
  activeMean: number;
  /** The most sessions the server's pool had open at once. */
  totalPeak: number;
}

/** One line of the phases table. */
export interface PhasedRow {
  /** `transactional-0`, `phased-50`, … */
  id: string;
  style: PaymentStyle;
  label: string;
  /** The route, with its `?providerLatencyMs=`. */
  path: string;
  providerLatencyMs: number;
  rps: number;
  latency: LatencySummary;
  responses: number;
  statuses: Record<string, number>;
  errors: number;
  /** Payments inserted (handler or first-step executions) by the measured run's requests. */
  executions: number;
  /** Rows the fake provider wrote for those requests. */
  charges: number;
  /** `rps / rps(transactional)` at the same latency in the same round (median over rounds). */
  ratioToTransactional: number;
  cpu: CpuPerRequest;
  sessions: SessionSummary;
  roundsRps: number[];
  roundsRatio: number[];
  /** Peak sessions idle in transaction of every round. */
  roundsIdleInTransactionPeak: number[];
}

/** How often `pg_stat_activity` is read during a measured run. */
export const SAMPLE_INTERVAL_MS = 50;

interface PhasedCase {
  id: string;
  style: PaymentStyle;
  path: string;
  providerLatencyMs: number;
}

type Measured = LoadResult & {
  executions: number;
  charges: number;
  cpu: CpuPerRequest;
  sessions: SessionSummary;
};

function summarizeSessions(samples: SessionStates[]): SessionSummary {
  const peak = (pick: (s: SessionStates) => number) => Math.max(0, ...samples.map(pick));
  const mean = (pick: (s: SessionStates) => number) =>
    samples.length ? samples.reduce((sum, s) => sum + pick(s), 0) / samples.length : 0;
  return {
    samples: samples.length,
    idleInTransactionPeak: peak((s) => s.idleInTransaction),
    idleInTransactionMean: mean((s) => s.idleInTransaction),
    longestIdleInTransactionMs: peak((s) => s.longestIdleInTransactionMs),
    medianLongestIdleInTransactionMs: samples.length
      ? median(samples.map((s) => s.longestIdleInTransactionMs))
      : 0,
    activePeak: peak((s) => s.active),
    activeMean: mean((s) => s.active),
    totalPeak: peak((s) => s.total),
  };
}

/**
 * Reads `pg_stat_activity` every `SAMPLE_INTERVAL_MS` (a read that takes longer delays the next
 * one) until `stop()`.
 */
function startSessionSampler(db: BenchDatabase): { stop(): Promise<SessionSummary> } {
  const samples: SessionStates[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const started = performance.now();
      samples.push(await db.sessionStates());
      const wait = SAMPLE_INTERVAL_MS - (performance.now() - started);
      if (wait > 0 && !stopped) await sleep(wait);
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return summarizeSessions(samples);
    },
  };
}

/**
 * autocannon ends a run with requests still in flight; the server finishes them (a payment
 * waits for its provider call). Wait for that before emptying or counting the tables.
 */
const settle = (benchCase: PhasedCase) => sleep(300 + 2 * benchCase.providerLatencyMs);

async function measureCase(
  server: BenchServer,
  db: BenchDatabase,
  benchCase: PhasedCase,
  settings: PhasedSettings,
  warmupSeconds: number,
): Promise<Measured> {
  const load: LoadSpec = {
    url: server.url,
    routes: [{ path: benchCase.path, key: { kind: 'fresh', prefix: benchCase.id } }],
    body: BENCH_BODY,
    connections: settings.connections,
  };
  await db.reset();
  await runLoad({ ...load, durationSeconds: warmupSeconds });
  await settle(benchCase);
  await db.reset();
  const cpuBefore = await cpuSnapshot(server.pid, db);
  const sampler = startSessionSampler(db);
  const result = await runLoad({ ...load, durationSeconds: settings.durationSeconds });
  const sessions = await sampler.stop();
  const cpu = cpuPerRequest(cpuBefore, await cpuSnapshot(server.pid, db), result.responses);
  await settle(benchCase);
  return {
    ...result,
    executions: await db.countEntries(),
    charges: await db.countCharges(),
    cpu,
    sessions,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const LABELS: Record<PaymentStyle, string> = {
  transactional: 'transactional',
  phased: 'phased (3 steps)',
};

/**
 * The sample-shaped payment (entry pending → provider call with `derivedKey('charge')` → entry
 * succeeded) on `/payments-tx` (one transaction held across the provider call) and
 * `/payments-phased` (an operation in three steps), first executions only (a new key per
 * request), at each provider latency. Both routes run on the same server; the latency is chosen
 * per request with `?providerLatencyMs=`. Cases are interleaved in rounds (the two routes of a
 * latency next to each other, in alternating order), each warmed up and measured from empty
 * tables, while the sessions of the server's pool are read from `pg_stat_activity` every
 * `SAMPLE_INTERVAL_MS`. req/s is the median over rounds, the ratio to the transactional route
 * the median of each round's ratio, CPU per request the median over rounds, and the rest comes
 * from the round with the median req/s.
 *
 * @param log - progress lines
 */
export async function runPhasedPhase(
  server: BenchServer,
  db: BenchDatabase,
  settings: PhasedSettings,
  log: (line: string) => void,
): Promise<PhasedRow[]> {
  if (settings.connections >= settings.poolSize) {
    log(
      `  warning: ${settings.connections} connections with a pool of ${settings.poolSize}: every ` +
        'pooled connection can end up in a /payments-tx transaction waiting for a provider write ' +
        'that needs one more; use fewer --connections or a larger --pool-size',
    );
  }
  const cases: PhasedCase[] = settings.providerLatenciesMs.flatMap((latency) =>
    (['transactional', 'phased'] as const).map((style) => ({
      id: `${style}-${latency}`,
      style,
      path: `${style === 'phased' ? ROUTES.paymentsPhased : ROUTES.paymentsTx}?providerLatencyMs=${latency}`,
      providerLatencyMs: latency,
    })),
  );
  const rounds: Map<string, Measured>[] = [];
  for (let round = 1; round <= settings.rounds; round++) {
    const warmup = round === 1 ? settings.warmupSeconds : Math.min(1, settings.warmupSeconds);
    const results = new Map<string, Measured>();
    for (const latency of settings.providerLatenciesMs) {
      const pair = cases.filter((benchCase) => benchCase.providerLatencyMs === latency);
      // Alternate which route of the pair goes first, so neither always follows the other.
      if (round % 2 === 0) pair.reverse();
      for (const benchCase of pair) {
        const result = await measureCase(server, db, benchCase, settings, warmup);
        results.set(benchCase.id, result);
        log(
          `  ${server.adapter} ${benchCase.style} @ ${latency} ms` +
            `${settings.rounds > 1 ? ` (round ${round})` : ''}: ${result.rps.toFixed(0)} req/s, ` +
            `p50 ${result.latency.p50.toFixed(2)} ms, p99 ${result.latency.p99.toFixed(2)} ms, ` +
            `idle in tx peak ${result.sessions.idleInTransactionPeak} mean ` +
            `${result.sessions.idleInTransactionMean.toFixed(2)} (${result.sessions.samples} samples), ` +
            `executions ${result.executions}, charges ${result.charges}, statuses ${JSON.stringify(result.statuses)}`,
        );
      }
    }
    rounds.push(results);
  }
  await db.reset();
  return cases.map((benchCase) => {
    const all = rounds.map((round) => round.get(benchCase.id)!);
    const baseline = rounds.map((round) =>
      round.get(`transactional-${benchCase.providerLatencyMs}`)!,
    );
    const ratios = all.map((result, index) => result.rps / baseline[index].rps);
    const rps = median(all.map((result) => result.rps));
    const chosen = [...all].sort((a, b) => Math.abs(a.rps - rps) - Math.abs(b.rps - rps))[0];
    return {
      id: benchCase.id,
      style: benchCase.style,
      label: LABELS[benchCase.style],
      path: benchCase.path,
      providerLatencyMs: benchCase.providerLatencyMs,
      rps,
      latency: chosen.latency,
      responses: chosen.responses,
      statuses: chosen.statuses,
      errors: chosen.errors + chosen.timeouts,
      executions: chosen.executions,
      charges: chosen.charges,
      ratioToTransactional: median(ratios),
      cpu: medianCpu(all.map((result) => result.cpu)),
      sessions: chosen.sessions,
      roundsRps: all.map((result) => result.rps),
      roundsRatio: ratios,
      roundsIdleInTransactionPeak: all.map((result) => result.sessions.idleInTransactionPeak),
    };
  });
}
