import type { ProbeRow } from './phases/latency-probe.phase';
import type { PurgeResult } from './phases/purge.phase';
import type { StormResult } from './phases/storm.phase';
import type { ThroughputRow } from './phases/throughput.phase';

/** One target of issue 4, checked against what was measured. */
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

/** The targets, in the units they are stated in. */
export const TARGETS = {
  firstToPlain: 0.8,
  replayToPlain: 1.2,
  addedP50Ms: 1,
  stormP99Ms: 250,
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

function stormChecks(storms: StormResult[] | undefined, path: string): TargetCheck[] {
  const storm = storms?.find((s) => s.path === path);
  const fivexx = storm
    ? Object.entries(storm.statuses)
        .filter(([status]) => status.startsWith('5'))
        .reduce((sum, [, count]) => sum + count, 0)
    : 0;
  return [
    check(`storm ${path}: executions`, 'exactly 1', () =>
      storm ? { measured: String(storm.executions), pass: storm.executions === 1 } : undefined,
    ),
    check(`storm ${path}: 5xx`, 'none', () =>
      storm ? { measured: String(fivexx), pass: fivexx === 0 } : undefined,
    ),
    check(`storm ${path}: p99`, `≤ ${TARGETS.stormP99Ms} ms`, () =>
      storm
        ? { measured: ms(storm.latency.p99), pass: storm.latency.p99 <= TARGETS.stormP99Ms }
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
  const peerFirst = row('peer-first');
  const probeFirst = inputs.probe?.find((r) => r.id === 'first');
  const { purge } = inputs;
  return [
    check('first execution vs plain (req/s)', `≥ ${TARGETS.firstToPlain.toFixed(2)}×`, () =>
      first
        ? { measured: ratio(first.ratioToPlain), pass: first.ratioToPlain >= TARGETS.firstToPlain }
        : undefined,
    ),
    check('replay vs plain (req/s)', `≥ ${TARGETS.replayToPlain.toFixed(2)}×`, () =>
      replay
        ? {
            measured: ratio(replay.ratioToPlain),
            pass: replay.ratioToPlain >= TARGETS.replayToPlain,
          }
        : undefined,
    ),
    check('p50 added on first execution (1 conn.)', `≤ ${TARGETS.addedP50Ms} ms`, () =>
      probeFirst
        ? {
            measured:
              ms(probeFirst.addedP50Ms) +
              (first && plain ? ` (loaded: ${ms(first.latency.p50 - plain.latency.p50)})` : ''),
            pass: probeFirst.addedP50Ms <= TARGETS.addedP50Ms,
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
    check('first execution vs Redis peer (req/s)', '≥ 1.00×', () =>
      first && peerFirst
        ? { measured: ratio(first.rps / peerFirst.rps), pass: first.rps >= peerFirst.rps }
        : undefined,
    ),
  ];
}
