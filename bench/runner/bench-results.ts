import type { BenchOptions } from './bench-options';
import type { BaselineBuild } from './baseline-build';
import type { MachineInfo } from './machine-info';
import type { BaselineRow } from './phases/baseline.phase';
import type { ProbeRow } from './phases/latency-probe.phase';
import type { LeakResult } from './phases/leak.phase';
import type { EncryptionRow } from './phases/encryption.phase';
import type { InstructionRow } from './phases/instructions.phase';
import type { PhasedRow } from './phases/phased.phase';
import type { PromisesRow } from './phases/promises.phase';
import type { PurgeResult } from './phases/purge.phase';
import type { StormResult } from './phases/storm.phase';
import type { ThroughputRow } from './phases/throughput.phase';
import type { WaitStormPhaseResult } from './phases/wait-storm.phase';
import type { TargetCheck } from './targets';

/** Everything measured on one adapter. */
export interface AdapterResult {
  adapter: string;
  /** Whether the peer library ran (Redis reachable, not `--no-peer`). */
  peer: boolean;
  /** Each part is absent when `--phases` left it out. */
  throughput?: ThroughputRow[];
  probe?: ProbeRow[];
  storms?: StormResult[];
  purge?: PurgeResult;
  leak?: LeakResult;
  /** The phased payment route against the transactional one (no target; reported only). */
  phased?: PhasedRow[];
  /** First executions and replays at 1 KB and 64 KB, sealed and in the clear (reported only). */
  encryption?: EncryptionRow[];
  /**
   * Same-key storms with `Prefer: wait` on two servers, woken by `LISTEN/NOTIFY` and by polling.
   */
  waitStorm?: WaitStormPhaseResult;
  /** Promises the server created per request of each throughput case (reported only). */
  promises?: PromisesRow[];
  /** `--baseline`: each case on this checkout and on the baseline commit (the only part run). */
  baseline?: BaselineRow[];
  /** `--instructions`: main-thread instructions per request of each case (the only part run). */
  instructions?: InstructionRow[];
  targets: TargetCheck[];
  /** Seconds this adapter took, server start to stop. */
  seconds: number;
}

/** The JSON written to `bench/results/latest.json`. */
export interface BenchResults {
  /** Bumped when the shape changes. */
  schemaVersion: 1;
  startedAt: string;
  finishedAt: string;
  seconds: number;
  machine: MachineInfo;
  options: Omit<BenchOptions, 'databaseUrl' | 'redisUrl'>;
  /** `--baseline`: the commit compared with (its temporary directory is gone by then). */
  baseline?: Omit<BaselineBuild, 'dir'>;
  adapters: AdapterResult[];
}
