import { median } from './latency-stats';
import type { ProbeRow } from './phases/latency-probe.phase';
import type { PurgeResult } from './phases/purge.phase';
import type { StormResult } from './phases/storm.phase';
import type { ThroughputRow } from './phases/throughput.phase';

/** One target (issue 14; the purge's from issue 4), checked against what was measured. */
export interface TargetCheck {
  name: string;
  target: string;
  measured: string;
  /** `undefined` when it was not measured (phase skipped, peer skipped). */
  pass: boolean | undefined;
}

/** What the targets are checked against; a part is absent when its phase did not run. */
export interface TargetInputs {
  throughput?: ThroughputRow[];
  probe?: ProbeRow[];
  storms?: StormResult[];
  purge?: PurgeResult;
}

/** The targets (issue 14), in the units they are stated in. */
export const TARGETS = {
  firstToFloor: 0.95,
  firstTxToPlainTx: 0.8,
  nodeUsBeyondPlain: 350,
  postgresUsBeyondPlain: 300,
  aheadOfDurablePeer: 1.5,
  stormP99ToFloor: 1.5,
  purgeRowsPerSecond: 200_000,
  purgeP99Ratio: 2,
} as const;

const ms = (value: number) => `${value.toFixed(2)} ms`;
const ratio = (value: number) => `${value.toFixed(2)}×`;

function check(
  name: string,
  target: string,
  measure: () => { measured: string; pass: boolean } | undefined,
): TargetCheck {
  const result = measure();
  return result
    ? { name, target, ...result }
    : { name, target, measured: 'not run', pass: undefined };
}

/** Per-round values of a storm joined as `a/b/c`, or the one value when it ran once. */
function perRound(values: readonly number[], format: (value: number) => string): string {
  return values.length > 1 ? ` (${values.map(format).join('/')})` : '';
}

function stormChecks(storms: StormResult[] | undefined, path: string): TargetCheck[] {
  const storm = storms?.find((s) => s.path === path);
  const floor = storms?.find((s) => s.path === '/storm-floor');
  const rounds = storm ? (storm.rounds ?? [storm]) : [];
  const fivexx = rounds
    .flatMap((round) => Object.entries(round.statuses))
    .filter(([status]) => status.startsWith('5'))
    .reduce((sum, [, count]) => sum + count, 0);
  const executions = rounds.map((round) => round.executions);
  const toFloor =
    storm && floor ? (storm.p99ToFloor ?? [storm.latency.p99 / floor.latency.p99]) : [];
  return [
    check(`storm ${path}: executions`, 'exactly 1 (every round)', () =>
      storm
        ? {
            measured: executions.join('/'),
            pass: executions.every((count) => count === 1),
          }
        : undefined,
    ),
    check(`storm ${path}: 5xx`, 'none', () =>
      storm ? { measured: String(fivexx), pass: fivexx === 0 } : undefined,
    ),
    check(`storm ${path}: p99 vs the bare 409 storm`, `≤ ${TARGETS.stormP99ToFloor}×`, () =>
      storm && floor && toFloor.length
        ? {
            measured:
              `${ratio(median(toFloor))}${perRound(toFloor, (r) => r.toFixed(2))} ` +
              `(${ms(storm.latency.p99)} vs ${ms(floor.latency.p99)})`,
            pass: median(toFloor) <= TARGETS.stormP99ToFloor,
          }
        : undefined,
    ),
  ];
}

/**
 * Checks the measurements of one adapter against the targets of issue 4. Ratios come from the
 * same run, side by side. "p50 added" is taken from the unloaded probe (one request at a time):
 * under saturating load p50 is mostly queueing, i.e. the throughput difference again; the
 * loaded difference is shown next to it.
 */
export function evaluateTargets(inputs: TargetInputs): TargetCheck[] {
  const row = (id: ThroughputRow['id']) => inputs.throughput?.find((r) => r.id === id);
  const plain = row('plain');
  const first = row('first');
  const replay = row('replay');
  const firstTx = row('first-tx');
  const plainTx = row('plain-tx');
  const durableFirst = row('durable-first');
  const durableReplay = row('durable-replay');
  const { purge } = inputs;
  const beyondPlain = (part: 'serverUs' | 'postgresUs') =>
    first && plain ? first.cpu[part] - plain.cpu[part] : undefined;
  const node = beyondPlain('serverUs');
  const postgres = beyondPlain('postgresUs');
  return [
    check('first execution vs the floor (req/s)', `≥ ${TARGETS.firstToFloor.toFixed(2)}×`, () =>
      first && !Number.isNaN(first.ratioToFloor)
        ? { measured: ratio(first.ratioToFloor), pass: first.ratioToFloor >= TARGETS.firstToFloor }
        : undefined,
    ),
    check(
      'transactional first execution vs plain in a transaction (req/s)',
      `≥ ${TARGETS.firstTxToPlainTx.toFixed(2)}×`,
      () =>
        firstTx && plainTx
          ? {
              measured: ratio(firstTx.rps / plainTx.rps),
              pass: firstTx.rps / plainTx.rps >= TARGETS.firstTxToPlainTx,
            }
          : undefined,
    ),
    check('Node CPU beyond plain per first execution', `≤ ${TARGETS.nodeUsBeyondPlain} µs`, () =>
      node !== undefined
        ? { measured: `${Math.round(node)} µs`, pass: node <= TARGETS.nodeUsBeyondPlain }
        : undefined,
    ),
    check(
      'PostgreSQL CPU beyond plain per first execution',
      `≤ ${TARGETS.postgresUsBeyondPlain} µs`,
      () =>
        postgres !== undefined
          ? {
              measured: `${Math.round(postgres)} µs`,
              pass: postgres <= TARGETS.postgresUsBeyondPlain,
            }
          : undefined,
    ),
    check('first execution vs the durable peer (req/s)', `≥ ${TARGETS.aheadOfDurablePeer}×`, () =>
      first && durableFirst
        ? {
            measured: ratio(first.rps / durableFirst.rps),
            pass: first.rps / durableFirst.rps >= TARGETS.aheadOfDurablePeer,
          }
        : undefined,
    ),
    check('replay vs the durable peer (req/s)', `≥ ${TARGETS.aheadOfDurablePeer}×`, () =>
      replay && durableReplay
        ? {
            measured: ratio(replay.rps / durableReplay.rps),
            pass: replay.rps / durableReplay.rps >= TARGETS.aheadOfDurablePeer,
          }
        : undefined,
    ),
    ...stormChecks(inputs.storms, '/idempotent'),
    ...stormChecks(inputs.storms, '/idempotent-tx'),
    check(
      'purge rate (alone)',
      `≥ ${TARGETS.purgeRowsPerSecond.toLocaleString('en-US')} rows/s`,
      () =>
        purge
          ? {
              measured: `${Math.round(purge.idle.rowsPerSecond).toLocaleString('en-US')} rows/s`,
              pass:
                purge.idle.rowsPerSecond >= TARGETS.purgeRowsPerSecond &&
                purge.idle.leftExpired === 0,
            }
          : undefined,
    ),
    check('claim p99 during purge vs idle', `≤ ${TARGETS.purgeP99Ratio}×`, () =>
      purge
        ? {
            measured:
              `${ratio(purge.p99Ratio)} (${ms(purge.claimDuringPurge.latency.p99)} vs ` +
              `${ms(purge.claimIdle.latency.p99)})`,
            pass: purge.p99Ratio <= TARGETS.purgeP99Ratio,
          }
        : undefined,
    ),
  ];
}
