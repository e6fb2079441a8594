import { median } from './latency-stats';
import type { ProbeRow } from './phases/latency-probe.phase';
import type { PurgeResult } from './phases/purge.phase';
import type { StormResult } from './phases/storm.phase';
import type { ThroughputRow } from './phases/throughput.phase';
import { ROUTES } from './phases/bench-routes';
import type { EncryptionRow } from './phases/encryption.phase';
import type { WaitStormPhaseResult, WaitStormResult } from './phases/wait-storm.phase';

/** One target, checked against what was measured. */
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
  encryption?: EncryptionRow[];
  waitStorm?: WaitStormPhaseResult;
}

/** The targets, in the units they are stated in. */
export const TARGETS = {
  firstToFloor: 0.95,
  firstTxToPlainTx: 0.8,
  nodeUsBeyondPlain: 350,
  postgresUsBeyondPlain: 300,
  aheadOfDurablePeer: 1.5,
  stormP99ToFloor: 1.5,
  purgeRowsPerSecond: 200_000,
  purgeP99Ratio: 2,
  /** Sealed throughput over the clear twin's at 1 KB bodies (at most 5 % lost). */
  sealedToClear1KB: 0.95,
  /** Wake-up p99 of the wait storm's waiters with `LISTEN/NOTIFY`, from the completion. */
  waitNotifyP99Ms: 5,
  /** First executions over the floor's statements sent from a bare guard and interceptor. */
  firstToInterceptorFloor: 0.95,
  /** Transactional first executions over the transactional floor's statements by hand. */
  firstTxToTxFloor: 0.95,
  /** Replays over the Redis peer's replays (req/s), and its Node CPU per replay over ours. */
  replayToRedisPeer: 1,
} as const;

/**
 * The median of the per-round ratios `a / b` of two throughput rows measured in the same rounds,
 * with the rounds' ratios; undefined when either row was not measured.
 * @param figure - what is compared in each round (default req/s)
 */
function roundsRatio(
  a: ThroughputRow | undefined,
  b: ThroughputRow | undefined,
  figure: (row: ThroughputRow, round: number) => number = (row, round) => row.roundsRps[round],
): { median: number; rounds: number[] } | undefined {
  if (!a || !b || a.roundsRps.length !== b.roundsRps.length) return undefined;
  const rounds = a.roundsRps.map((_, i) => figure(a, i) / figure(b, i));
  return { median: median(rounds), rounds };
}

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
  const floor = storms?.find((s) => s.path === ROUTES.stormFloor);
  const rounds = storm ? (storm.rounds ?? [storm]) : [];
  const fivexx = rounds
    .flatMap((round) => Object.entries(round.statuses))
    .filter(([status]) => status.startsWith('5'))
    .reduce((sum, [, count]) => sum + count, 0);
  const executions = rounds.map((round) => round.executions);
  // Per round, against the bare storm of the same round (`combineStormRounds` sets them all).
  const toFloor = storm?.p99ToFloor ?? [];
  // What the same 409s cost thrown from a bare interceptor: the most a layer of this design can.
  const reach = storms?.find((s) => s.path === ROUTES.stormFloorInterceptor);
  const reachToFloor = reach?.p99ToFloor ?? [];
  const cpu = storm?.cpuToFloor ?? [];
  const reachCpu = reach?.cpuToFloor ?? [];
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
              `(${ms(storm.latency.p99)} vs ${ms(floor.latency.p99)})` +
              (reachToFloor.length
                ? `; floor from an interceptor ${ratio(median(reachToFloor))}` +
                  perRound(reachToFloor, (r) => r.toFixed(2))
                : '') +
              // Steadier than the p99: what each storm cost the server, against the bare one's.
              (cpu.length
                ? `; server CPU ${ratio(median(cpu))}` +
                  (reachCpu.length ? ` (floor from an interceptor ${ratio(median(reachCpu))})` : '')
                : ''),
            pass: median(toFloor) <= TARGETS.stormP99ToFloor,
          }
        : undefined,
    ),
  ];
}

function encryptionChecks(rows: EncryptionRow[] | undefined): TargetCheck[] {
  return (['first', 'replay'] as const).map((mode) => {
    const sealed = rows?.find((row) => row.mode === mode && row.bytes === 1024 && row.sealed);
    return check(
      `encryption at rest, 1 KB ${mode === 'first' ? 'first execution' : 'replay'}: sealed vs clear (req/s)`,
      `≥ ${TARGETS.sealedToClear1KB.toFixed(2)}×`,
      () =>
        sealed
          ? {
              measured: `${ratio(sealed.ratioToClear)}${perRound(sealed.roundsRatio, (r) => r.toFixed(2))}`,
              pass: sealed.ratioToClear >= TARGETS.sealedToClear1KB,
            }
          : undefined,
    );
  });
}

function waitStormChecks(phase: WaitStormPhaseResult | undefined): TargetCheck[] {
  const storm = (wakeUps: WaitStormResult['wakeUps']) =>
    phase?.paths.find((path) => path.wakeUps === wakeUps);
  const label = { notify: 'LISTEN/NOTIFY', poll: 'polling' } as const;
  const checks: TargetCheck[] = [];
  for (const wakeUps of ['notify', 'poll'] as const) {
    const result = storm(wakeUps);
    checks.push(
      check(`wait storm (${label[wakeUps]}): executions per key`, 'exactly 1 (every key)', () =>
        result
          ? {
              measured: result.rounds.map((round) => round.executions).join('/'),
              pass: result.rounds.every((round) => round.executions === 1),
            }
          : undefined,
      ),
      check(`wait storm (${label[wakeUps]}): statuses`, 'all 201 (no 409, no 5xx)', () => {
        if (!result) return undefined;
        const counts: Record<string, number> = {};
        for (const round of result.rounds) {
          for (const [status, count] of Object.entries(round.statuses)) {
            counts[status] = (counts[status] ?? 0) + count;
          }
        }
        const measured = Object.entries(counts)
          .map(([status, count]) => `${status}×${count}`)
          .join(' ');
        return { measured, pass: Object.keys(counts).every((status) => status === '201') };
      }),
    );
  }
  const notify = storm('notify');
  checks.push(
    check(
      "wait storm (LISTEN/NOTIFY): wake-up p99 from the completion's commit",
      `≤ ${TARGETS.waitNotifyP99Ms} ms`,
      () =>
        notify && notify.fromCommit.all.count > 0
          ? {
              measured:
                `${ms(notify.fromCommit.all.p99)} (same instance ${ms(notify.fromCommit.same.p99)}, ` +
                `other ${ms(notify.fromCommit.other.p99)}; ${phase!.listening} of 2 servers listening)`,
              pass: notify.fromCommit.all.p99 <= TARGETS.waitNotifyP99Ms,
            }
          : undefined,
    ),
  );
  return checks;
}

/**
 * A ratio target between two rows measured side by side: the median of the rounds' ratios.
 * With `ceiling`, the same ratio of that row over `b` is printed too: what the same statements
 * reach when sent from a bare guard and interceptor, the most a layer of this design can; with
 * `contract`, that of the contract floor: the most any implementation of the contract can.
 */
function sideBySide(
  name: string,
  a: ThroughputRow | undefined,
  b: ThroughputRow | undefined,
  target: number,
  { ceiling, contract }: { ceiling?: ThroughputRow; contract?: ThroughputRow } = {},
): TargetCheck {
  return check(name, `≥ ${target.toFixed(2)}×`, () => {
    const measured = roundsRatio(a, b);
    if (!measured) return undefined;
    const reach = roundsRatio(ceiling, b);
    const contractReach = roundsRatio(contract, b);
    return {
      measured:
        `${ratio(measured.median)}${perRound(measured.rounds, (r) => r.toFixed(2))}` +
        (reach ? `; floor from an interceptor ${ratio(reach.median)}` : '') +
        (contractReach ? `; contract floor ${ratio(contractReach.median)}` : ''),
      pass: measured.median >= target,
    };
  });
}

/**
 * Checks the measurements of one adapter against the targets. Ratios come from the same run,
 * side by side. "p50 added" is taken from the unloaded probe (one request at a time):
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
  const peerReplay = row('peer-replay');
  const { purge } = inputs;
  const beyondPlain = (part: 'serverUs' | 'postgresUs') =>
    first && plain ? first.cpu[part] - plain.cpu[part] : undefined;
  const node = beyondPlain('serverUs');
  const postgres = beyondPlain('postgresUs');
  return [
    sideBySide('first execution vs the floor (req/s)', first, row('floor'), TARGETS.firstToFloor, {
      ceiling: row('floor-interceptor'),
      contract: row('floor-contract'),
    }),
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
    sideBySide(
      'first execution vs the floor from an interceptor (req/s)',
      first,
      row('floor-interceptor'),
      TARGETS.firstToInterceptorFloor,
      { contract: row('floor-contract') },
    ),
    sideBySide(
      'first execution vs the contract floor from an interceptor (req/s)',
      first,
      row('floor-contract'),
      TARGETS.firstToInterceptorFloor,
    ),
    sideBySide(
      'transactional first execution vs the transactional floor (req/s)',
      firstTx,
      row('floor-tx'),
      TARGETS.firstTxToTxFloor,
      { ceiling: row('floor-tx-interceptor'), contract: row('floor-contract-tx') },
    ),
    sideBySide(
      'transactional first execution vs that floor on a TypeORM query runner (req/s)',
      firstTx,
      row('floor-tx-typeorm'),
      TARGETS.firstTxToTxFloor,
      { ceiling: row('floor-tx-interceptor') },
    ),
    sideBySide(
      'transactional first execution vs that floor from an interceptor (req/s)',
      firstTx,
      row('floor-tx-interceptor'),
      TARGETS.firstTxToTxFloor,
      { contract: row('floor-contract-tx') },
    ),
    sideBySide(
      'transactional first execution vs the transactional contract floor (req/s)',
      firstTx,
      row('floor-contract-tx'),
      TARGETS.firstTxToTxFloor,
    ),
    sideBySide(
      'replay vs the Redis peer replay (req/s)',
      replay,
      peerReplay,
      TARGETS.replayToRedisPeer,
    ),
    check('Node CPU per replay vs the Redis peer', "≤ the peer's", () => {
      const cpu = roundsRatio(replay, peerReplay, (row, round) => row.roundsCpu[round].serverUs);
      const main = roundsRatio(
        replay,
        peerReplay,
        (row, round) => row.roundsCpu[round].serverMainUs,
      );
      return cpu
        ? {
            measured:
              `${ratio(cpu.median)}${perRound(cpu.rounds, (r) => r.toFixed(2))} ` +
              `(${Math.round(replay!.cpu.serverUs)} vs ${Math.round(peerReplay!.cpu.serverUs)} µs)` +
              (main ? `; main thread ${ratio(main.median)}` : ''),
            pass: cpu.median <= 1,
          }
        : undefined;
    }),
    sideBySide(
      'first execution vs the durable peer (req/s)',
      first,
      durableFirst,
      TARGETS.aheadOfDurablePeer,
      { ceiling: row('floor-interceptor'), contract: row('floor-contract') },
    ),
    sideBySide(
      'replay vs the durable peer (req/s)',
      replay,
      durableReplay,
      TARGETS.aheadOfDurablePeer,
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
    ...encryptionChecks(inputs.encryption),
    ...waitStormChecks(inputs.waitStorm),
  ];
}
