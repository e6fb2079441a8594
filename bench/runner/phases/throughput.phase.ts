import { randomBytes } from 'node:crypto';
import type { BenchDatabase } from '../bench-database';
import type { CpuPerRequest } from '../cpu-usage';
import { cpuPerRequest, cpuSnapshot, medianCpu, serverCpuText } from '../cpu-usage';
import { httpRequest } from '../http-request';
import type { LatencySummary } from '../latency-stats';
import { median } from '../latency-stats';
import type { KeyMode, LoadResult, LoadSpec } from '../load';
import { runLoad } from '../load';
import type { BenchServer } from '../server-process';
import type { BenchCase } from './bench-routes';
import { BENCH_BODY, selectedCases } from './bench-routes';

/** Settings of the throughput phases. */
export interface ThroughputSettings {
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  rounds: number;
  /** Ids of the cases to run; all of them when undefined. */
  cases?: readonly BenchCase['id'][];
}

/** One line of the throughput table. */
export interface ThroughputRow {
  id: BenchCase['id'];
  label: string;
  path: string;
  rps: number;
  latency: LatencySummary;
  responses: number;
  statuses: Record<string, number>;
  errors: number;
  /** Handler executions (rows inserted) during the measured run. */
  executions: number;
  /** `rps / rps(plain)` of the same round (median over rounds). */
  ratioToPlain: number;
  /** `rps / rps(floor)` of the same round (median over rounds); `NaN` without a floor case. */
  ratioToFloor: number;
  /** CPU per request of the server, PostgreSQL and the load generator (medians over rounds). */
  cpu: CpuPerRequest;
  /** req/s, CPU per request and ratio to plain of every round. */
  roundsRps: number[];
  roundsCpu: CpuPerRequest[];
  roundsRatio: number[];
  roundsRatioToFloor: number[];
}

/**
 * Creates the record a replay case repeats.
 * @throws Error when the first request is not answered 201
 */
export async function primeReplayKey(server: BenchServer, path: string, key: string) {
  const answer = await httpRequest(server.url, {
    method: 'POST',
    path,
    body: BENCH_BODY,
    headers: { 'idempotency-key': key },
  });
  if (answer.status !== 201) {
    throw new Error(`priming ${path} with a key answered ${answer.status}: ${answer.body}`);
  }
}

/**
 * The keys a case's requests carry: none, a new one each, or one key whose record is created
 * here (on tables just emptied), for a replay case.
 */
export async function caseKey(server: BenchServer, benchCase: BenchCase): Promise<KeyMode> {
  if (benchCase.key === 'fresh') return { kind: 'fresh', prefix: benchCase.id };
  if (benchCase.key === 'none') return { kind: 'none' };
  const key = `${benchCase.id}-${randomBytes(6).toString('hex')}`;
  await primeReplayKey(server, benchCase.path, key);
  return { kind: 'fixed', key };
}

/**
 * Readies a case for a counted run of a fixed number of requests: empties the tables (primes a
 * replay case's key), sends `warmupRequests`, and empties them again (a replay case keeps its
 * one record).
 * @returns the case's load, to run with the `amount` to count
 */
export async function warmedUpLoad(
  server: BenchServer,
  db: BenchDatabase,
  benchCase: BenchCase,
  connections: number,
  warmupRequests: number,
): Promise<Omit<LoadSpec, 'amount'>> {
  await db.reset();
  const load = {
    url: server.url,
    routes: [{ path: benchCase.path, key: await caseKey(server, benchCase) }],
    body: BENCH_BODY,
    connections,
  };
  await runLoad({ ...load, amount: warmupRequests });
  if (benchCase.key !== 'fixed') await db.reset();
  return load;
}

/** One measured run of a case: autocannon's result, handler executions and CPU per request. */
export type Measured = LoadResult & { executions: number; cpu: CpuPerRequest };

/**
 * Runs one case once on one server: empties the tables (primes the key of a replay case), warms
 * up, empties them again, then measures for `settings.durationSeconds`. Shared with the
 * `--baseline` comparison, so both builds are driven by exactly the same load.
 *
 * @param warmupSeconds - warm-up of this run (shorter after the first round)
 */
export async function measureCase(
  server: BenchServer,
  db: BenchDatabase,
  benchCase: BenchCase,
  settings: ThroughputSettings,
  warmupSeconds: number,
): Promise<Measured> {
  await db.reset();
  const key = await caseKey(server, benchCase);
  const load = {
    url: server.url,
    routes: [{ path: benchCase.path, key }],
    body: BENCH_BODY,
    connections: settings.connections,
  };
  await runLoad({ ...load, durationSeconds: warmupSeconds });
  // Start the measured run on empty tables (a replay case keeps its one record).
  if (benchCase.key !== 'fixed') await db.reset();
  const before = await db.countEntries();
  const cpuBefore = await cpuSnapshot(server.pid, db);
  const result = await runLoad({ ...load, durationSeconds: settings.durationSeconds });
  const cpu = cpuPerRequest(cpuBefore, await cpuSnapshot(server.pid, db), result.responses);
  return { ...result, executions: (await db.countEntries()) - before, cpu };
}

/**
 * Measures every case of the table (plain, plain in a transaction, the floor and the lean floor,
 * first execution, transactional first execution, replay, and the durable and Redis peers' first
 * execution and replay) on the same server, each warmed up and
 * then measured from empty tables, with the server's and PostgreSQL's CPU time per request.
 * With several rounds the cases are interleaved (plain, first, …, plain, first, …) so that a
 * noisy neighbour hits them alike: req/s is the median over rounds, the ratios to plain and to
 * the floor the medians of each round's ratios, CPU per request the median over rounds, and
 * latency from the round with the median req/s.
 *
 * @param peer - whether the server runs the peer route
 * @param log - progress lines
 */
export async function runThroughputPhase(
  server: BenchServer,
  db: BenchDatabase,
  settings: ThroughputSettings,
  peer: boolean,
  log: (line: string) => void,
): Promise<ThroughputRow[]> {
  const cases = selectedCases(settings.cases, peer);
  const rounds: Map<BenchCase['id'], Measured & { ratio: number; ratioToFloor: number }>[] = [];
  for (let round = 1; round <= settings.rounds; round++) {
    // Later rounds run on a warm process: a short warm-up refills the pool and connections.
    const warmup = round === 1 ? settings.warmupSeconds : Math.min(1, settings.warmupSeconds);
    const results = new Map<BenchCase['id'], Measured & { ratio: number; ratioToFloor: number }>();
    for (const benchCase of cases) {
      const result = await measureCase(server, db, benchCase, settings, warmup);
      const plain = results.get('plain')?.rps ?? result.rps;
      results.set(benchCase.id, { ...result, ratio: result.rps / plain, ratioToFloor: NaN });
      log(
        `  ${server.adapter} ${benchCase.label}${settings.rounds > 1 ? ` (round ${round})` : ''}: ` +
          `${result.rps.toFixed(0)} req/s, p50 ${result.latency.p50.toFixed(2)} ms, ` +
          `p99 ${result.latency.p99.toFixed(2)} ms, ${serverCpuText(result.cpu)} ` +
          `PostgreSQL ${result.cpu.postgresUs.toFixed(0)} µs, statuses ${JSON.stringify(result.statuses)}`,
      );
    }
    const floor = results.get('floor')?.rps;
    for (const result of results.values()) result.ratioToFloor = result.rps / (floor ?? NaN);
    rounds.push(results);
  }
  await db.reset();
  return cases.map((benchCase) => {
    const all = rounds.map((round) => round.get(benchCase.id)!);
    const rps = median(all.map((result) => result.rps));
    const chosen = [...all].sort((a, b) => Math.abs(a.rps - rps) - Math.abs(b.rps - rps))[0];
    return {
      id: benchCase.id,
      label: benchCase.label,
      path: benchCase.path,
      rps,
      latency: chosen.latency,
      responses: chosen.responses,
      statuses: chosen.statuses,
      errors: chosen.errors + chosen.timeouts,
      executions: chosen.executions,
      ratioToPlain: median(all.map((result) => result.ratio)),
      ratioToFloor: median(all.map((result) => result.ratioToFloor)),
      cpu: medianCpu(all.map((result) => result.cpu)),
      roundsRps: all.map((result) => result.rps),
      roundsCpu: all.map((result) => result.cpu),
      roundsRatio: all.map((result) => result.ratio),
      roundsRatioToFloor: all.map((result) => result.ratioToFloor),
    };
  });
}
