import type { BenchDatabase } from '../bench-database';
import { httpJson } from '../http-request';
import type { BenchHealth } from '../../app/health.controller';
import {
  countingOn,
  eventsPerRequest,
  mainThreadEvents,
  simulatedCosts,
} from '../instruction-count';
import type { SimulatedCosts } from '../instruction-count';
import { median } from '../latency-stats';
import { runLoad, summedStatuses } from '../load';
import { BENCH_HOST } from '../server-process';
import type { BenchServer } from '../server-process';
import type { BenchCase } from './bench-routes';
import { selectedCases } from './bench-routes';
import { hasRoute } from './baseline.phase';
import { warmedUpLoad } from './throughput.phase';

/** One build counted: its server (running under callgrind) and the database only it uses. */
export interface CountedBuild {
  name: 'current' | 'baseline';
  server: BenchServer;
  db: BenchDatabase;
}

/** Settings of `--instructions`. */
export interface InstructionSettings {
  /** Requests per window, each window's count divided by them. */
  requests: number;
  /** Requests of warm-up before each case's first window (a quarter of `requests` later). */
  warmupRequests: number;
  /**
   * Concurrent connections of the load: one by default, since requests that arrive together
   * share the event loop's turns and move the count with how they happened to coincide.
   */
  connections: number;
  rounds: number;
  cases: BenchCase['id'][] | undefined;
}

/** One build's counts for a case. */
export interface InstructionFigures {
  /** Median over the rounds of the main thread's instructions per request. */
  perRequest: number;
  roundsPerRequest: number[];
  /** Median over the rounds of this case's count over `floor-interceptor`'s of the same round. */
  toFloorInterceptor?: number;
  /** Responses by status over every window. */
  statuses: Record<string, number>;
  /** With `--cache-sim`: the simulated misses and estimated cycles per request. */
  simulated?: SimulatedFigures;
}

/** The cache and branch simulation's figures of one build's case (`--cache-sim`). */
export interface SimulatedFigures {
  /** Median over the rounds of each figure per request. */
  perRequest: SimulatedCosts;
  roundsCycles: number[];
  /** Median over the rounds of the estimated cycles over `floor-interceptor`'s. */
  cyclesToFloorInterceptor?: number;
}

/** One case counted on this checkout (and on the baseline with `--baseline`). */
export interface InstructionRow {
  id: BenchCase['id'];
  label: string;
  path: string;
  current: InstructionFigures;
  baseline?: InstructionFigures;
  /** current / baseline of each round, and their median, lowest and highest. */
  roundsRatio?: number[];
  ratio?: number;
  ratioMin?: number;
  ratioMax?: number;
  /** With `--cache-sim`: the median of each round's current / baseline estimated cycles. */
  cyclesRatio?: number;
}

interface Window {
  perRequest: number;
  costs: SimulatedCosts | undefined;
  statuses: Record<string, number>;
}

/**
 * One window: empties the tables (primes a replay case's key), warms up, collects garbage
 * (`/health?gc=1`: a collection owed to earlier windows is not counted in this one), then counts
 * the main thread's instructions over `requests` requests.
 */
async function countWindow(
  build: CountedBuild,
  benchCase: BenchCase,
  settings: InstructionSettings,
  warmupRequests: number,
): Promise<Window> {
  const { server, db } = build;
  const load = await warmedUpLoad(server, db, benchCase, settings.connections, warmupRequests);
  const health = await httpJson<BenchHealth>(server.url, { method: 'GET', path: '/health?gc=1' });
  // Nothing is in flight here: hooks still on were left on by an earlier case, and would be
  // counted against this one (unless --async-hooks keeps them on for every case).
  if (health.asyncHooks && process.env.BENCH_ASYNC_HOOKS !== 'on') {
    console.warn(`  ${benchCase.id}: Node's async hooks were on before the window (left on)`);
  }
  await countingOn(server.pid, BENCH_HOST, true);
  const before = await mainThreadEvents(server.pid, BENCH_HOST);
  const result = await runLoad({ ...load, amount: settings.requests });
  const after = await mainThreadEvents(server.pid, BENCH_HOST);
  await countingOn(server.pid, BENCH_HOST, false);
  const perRequest = eventsPerRequest(before, after, result.responses);
  return {
    perRequest: perRequest.Ir,
    costs: simulatedCosts(perRequest),
    statuses: result.statuses,
  };
}

function figures(windows: Window[], floor: Window[] | undefined): InstructionFigures {
  const statuses = summedStatuses(windows);
  const roundsPerRequest = windows.map((window) => window.perRequest);
  const simulated = simulatedFigures(windows, floor);
  return {
    perRequest: median(roundsPerRequest),
    roundsPerRequest,
    ...(floor
      ? { toFloorInterceptor: median(windows.map((w, i) => w.perRequest / floor[i].perRequest)) }
      : {}),
    statuses,
    ...(simulated ? { simulated } : {}),
  };
}

function simulatedFigures(
  windows: Window[],
  floor: Window[] | undefined,
): SimulatedFigures | undefined {
  const costs = windows.map((window) => window.costs);
  if (!costs.every((cost) => cost !== undefined)) return undefined;
  const of = (figure: keyof SimulatedCosts) => median(costs.map((cost) => cost[figure]));
  const floorCycles = floor?.map((window) => window.costs?.cycles);
  return {
    perRequest: {
      instructionL1Misses: of('instructionL1Misses'),
      dataL1Misses: of('dataL1Misses'),
      instructionLlMisses: of('instructionLlMisses'),
      dataLlMisses: of('dataLlMisses'),
      branchMisses: of('branchMisses'),
      cycles: of('cycles'),
    },
    roundsCycles: costs.map((cost) => cost.cycles),
    ...(floorCycles?.every((cycles) => cycles !== undefined)
      ? { cyclesToFloorInterceptor: median(costs.map((cost, i) => cost.cycles / floorCycles[i]!)) }
      : {}),
  };
}

/**
 * `--instructions`: counts the instructions the server's main thread executes per request of
 * each selected case, under valgrind's callgrind, on this checkout and (with `--baseline`) on
 * the baseline, in interleaved rounds (the baseline first in odd rounds). Unlike req/s and CPU
 * time the count hardly moves with the host's load or speed, so a change of a few per cent shows
 * in one run; it does not weigh what an instruction costs (a cache miss, a system call's wait).
 * With `--cache-sim` callgrind also simulates the caches and branch predictor, and each case gets
 * the misses and an estimate of cycles per request.
 *
 * @param builds - this checkout's build first, then the baseline's if any
 * @param log - progress lines
 */
export async function runInstructionsPhase(
  builds: CountedBuild[],
  settings: InstructionSettings,
  log: (line: string) => void,
): Promise<InstructionRow[]> {
  const cases: BenchCase[] = [];
  for (const benchCase of selectedCases(
    settings.cases,
    builds.every((build) => build.server.peer),
  )) {
    const missing = [];
    for (const build of builds) {
      if (!(await hasRoute(build.server, benchCase.path))) missing.push(build.name);
    }
    if (missing.length)
      log(`  ${benchCase.label}: no ${benchCase.path} on ${missing.join(', ')}, left out`);
    else cases.push(benchCase);
  }
  const windows = new Map(builds.map((build) => [build.name, new Map<string, Window[]>()]));
  for (let round = 1; round <= settings.rounds; round++) {
    const order = round % 2 ? [...builds].reverse() : builds;
    for (const benchCase of cases) {
      for (const build of order) {
        const warmup = round === 1 ? settings.warmupRequests : Math.ceil(settings.requests / 4);
        const window = await countWindow(build, benchCase, settings, warmup);
        const counted = windows.get(build.name)!;
        counted.set(benchCase.id, [...(counted.get(benchCase.id) ?? []), window]);
        const cycles = window.costs
          ? `, ${(window.costs.cycles / 1000).toFixed(0)} k estimated cycles`
          : '';
        log(
          `  ${build.server.adapter} ${benchCase.label} ${build.name} (round ${round}): ` +
            `${(window.perRequest / 1000).toFixed(0)} k instructions/request${cycles}, ` +
            `statuses ${JSON.stringify(window.statuses)}`,
        );
      }
    }
  }
  await Promise.all(builds.map((build) => build.db.reset()));
  return cases.map((benchCase): InstructionRow => {
    const of = (name: CountedBuild['name']) => {
      const counted = windows.get(name);
      const own = counted?.get(benchCase.id);
      return own ? figures(own, counted!.get('floor-interceptor')) : undefined;
    };
    const current = of('current')!;
    const baseline = of('baseline');
    if (!baseline)
      return { id: benchCase.id, label: benchCase.label, path: benchCase.path, current };
    const roundsRatio = current.roundsPerRequest.map(
      (count, i) => count / baseline.roundsPerRequest[i],
    );
    return {
      id: benchCase.id,
      label: benchCase.label,
      path: benchCase.path,
      current,
      baseline,
      roundsRatio,
      ratio: median(roundsRatio),
      ratioMin: Math.min(...roundsRatio),
      ratioMax: Math.max(...roundsRatio),
      ...(current.simulated && baseline.simulated
        ? {
            cyclesRatio: median(
              current.simulated.roundsCycles.map(
                (cycles, i) => cycles / baseline.simulated!.roundsCycles[i],
              ),
            ),
          }
        : {}),
    };
  });
}
