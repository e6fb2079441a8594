import type { BenchDatabase } from '../bench-database';
import { medianCpu, serverCpuText } from '../cpu-usage';
import type { CpuPerRequest } from '../cpu-usage';
import { httpRequest } from '../http-request';
import { median } from '../latency-stats';
import { summedStatuses } from '../load';
import type { BenchServer } from '../server-process';
import type { BenchCase } from './bench-routes';
import { BENCH_BODY, selectedCases } from './bench-routes';
import type { Measured, ThroughputSettings } from './throughput.phase';
import { measureCase } from './throughput.phase';

/** One build under test: its server and the database only it uses. */
export interface BuildUnderTest {
  server: BenchServer;
  db: BenchDatabase;
}

/** One build's figures for a case, over the rounds. */
export interface BuildFigures {
  /** Median req/s over the rounds. */
  rps: number;
  /** Median over the rounds of each round's p50 and p99 (ms). */
  p50: number;
  p99: number;
  roundsRps: number[];
  roundsP99: number[];
  /** Responses by status over every round, and connection errors and timeouts. */
  statuses: Record<string, number>;
  errors: number;
  /** Handler executions (rows inserted) over every measured run. */
  executions: number;
  /** Median over the rounds of each CPU figure per request (the server's, its main thread's). */
  cpu: CpuPerRequest;
}

/** One case measured on this checkout and on the baseline. */
export interface BaselineRow {
  id: BenchCase['id'];
  label: string;
  path: string;
  /** False when the baseline's bench app has no such route: nothing was measured. */
  comparable: boolean;
  current?: BuildFigures;
  baseline?: BuildFigures;
  /** `rps(current) / rps(baseline)` of each round, and their median, lowest and highest. */
  roundsRatio: number[];
  ratio: number;
  ratioMin: number;
  ratioMax: number;
  /** The median of each round's current / baseline server CPU per request. */
  cpuRatio: number;
}

/**
 * Whether the server has the case's route: a route the app does not mount answers 404 on either
 * adapter, whatever the body or key.
 */
export async function hasRoute(server: BenchServer, path: string): Promise<boolean> {
  const answer = await httpRequest(server.url, {
    method: 'POST',
    path,
    body: BENCH_BODY,
    headers: { 'idempotency-key': `route-check-${Date.now()}` },
  });
  return answer.status !== 404;
}

function figures(runs: Measured[]): BuildFigures {
  const statuses = summedStatuses(runs);
  return {
    rps: median(runs.map((run) => run.rps)),
    p50: median(runs.map((run) => run.latency.p50)),
    p99: median(runs.map((run) => run.latency.p99)),
    roundsRps: runs.map((run) => run.rps),
    roundsP99: runs.map((run) => run.latency.p99),
    statuses,
    errors: runs.reduce((sum, run) => sum + run.errors + run.timeouts, 0),
    executions: runs.reduce((sum, run) => sum + run.executions, 0),
    cpu: medianCpu(runs.map((run) => run.cpu)),
  };
}

/**
 * `--baseline`: measures the selected throughput cases on this checkout's server and on the
 * baseline's, both running at once (each on its own database), in interleaved rounds. Within a
 * round each case runs on both builds back to back, the baseline first in odd rounds and this
 * checkout first in even ones, so a drift of the machine's speed over a round (a neighbour, a
 * checkpoint, a warming cache) falls on both alike. Each round gives a ratio current / baseline;
 * the row keeps their median and spread. The load of every run is `measureCase`'s, the same as
 * the throughput phase's.
 *
 * @param log - progress lines
 * @returns one row per case; a case whose route the baseline lacks is `comparable: false`
 */
export async function runBaselinePhase(
  current: BuildUnderTest,
  baseline: BuildUnderTest,
  settings: ThroughputSettings,
  peer: boolean,
  log: (line: string) => void,
): Promise<BaselineRow[]> {
  const selected = selectedCases(settings.cases, peer);
  const comparable: BenchCase[] = [];
  for (const benchCase of selected) {
    if (await hasRoute(baseline.server, benchCase.path)) comparable.push(benchCase);
    else log(`  ${benchCase.label}: the baseline has no ${benchCase.path}, not comparable`);
  }
  const runs = new Map(
    comparable.map((benchCase) => [
      benchCase.id,
      { current: [] as Measured[], baseline: [] as Measured[] },
    ]),
  );
  const adapter = current.server.adapter;
  for (let round = 1; round <= settings.rounds; round++) {
    const warmup = round === 1 ? settings.warmupSeconds : Math.min(1, settings.warmupSeconds);
    const order =
      round % 2 ? (['baseline', 'current'] as const) : (['current', 'baseline'] as const);
    for (const benchCase of comparable) {
      for (const build of order) {
        const target = build === 'current' ? current : baseline;
        const result = await measureCase(target.server, target.db, benchCase, settings, warmup);
        runs.get(benchCase.id)![build].push(result);
        log(
          `  ${adapter} ${benchCase.label} ${build} (round ${round}): ${result.rps.toFixed(0)} req/s, ` +
            `p99 ${result.latency.p99.toFixed(2)} ms, ${serverCpuText(result.cpu)}, ` +
            `statuses ${JSON.stringify(result.statuses)}`,
        );
      }
    }
  }
  await Promise.all([current.db.reset(), baseline.db.reset()]);
  return selected.map((benchCase): BaselineRow => {
    const row = { id: benchCase.id, label: benchCase.label, path: benchCase.path };
    const measured = runs.get(benchCase.id);
    if (!measured) {
      return {
        ...row,
        comparable: false,
        roundsRatio: [],
        ratio: NaN,
        ratioMin: NaN,
        ratioMax: NaN,
        cpuRatio: NaN,
      };
    }
    const roundsRatio = measured.current.map((run, i) => run.rps / measured.baseline[i].rps);
    const cpuRatios = measured.current.map(
      (run, i) => run.cpu.serverUs / measured.baseline[i].cpu.serverUs,
    );
    return {
      ...row,
      comparable: true,
      current: figures(measured.current),
      baseline: figures(measured.baseline),
      roundsRatio,
      ratio: median(roundsRatio),
      ratioMin: Math.min(...roundsRatio),
      ratioMax: Math.max(...roundsRatio),
      cpuRatio: median(cpuRatios),
    };
  });
}
