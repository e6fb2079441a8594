import { randomBytes } from 'node:crypto';
import { SIZED_BODY_BYTES, SIZED_BODY_PREFIXES } from '../../app/sized-body.routes';
import type { BenchDatabase } from '../bench-database';
import type { CpuPerRequest } from '../cpu-usage';
import { cpuPerRequest, cpuSnapshot, medianCpu } from '../cpu-usage';
import type { LatencySummary } from '../latency-stats';
import { median } from '../latency-stats';
import type { KeyMode, LoadResult } from '../load';
import { runLoad } from '../load';
import type { BenchServer } from '../server-process';
import { BENCH_BODY } from './bench-routes';
import { primeReplayKey } from './throughput.phase';

/** Settings of the encryption phase (the throughput phase's load). */
export interface EncryptionSettings {
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  rounds: number;
}

/** What a case measures: first executions (a new key per request) or replays of one key. */
export type EncryptionMode = 'first' | 'replay';

/** One line of the encryption table. */
export interface EncryptionRow {
  /** `first-1024-clear`, `replay-65536-sealed`, … */
  id: string;
  mode: EncryptionMode;
  /** Size of the response body, in bytes. */
  bytes: number;
  /** Whether the route's server has `encryption`. */
  sealed: boolean;
  path: string;
  rps: number;
  latency: LatencySummary;
  responses: number;
  statuses: Record<string, number>;
  errors: number;
  /** Handler executions (rows inserted) during the measured run. */
  executions: number;
  /** `rps / rps(the same case in the clear)` of the same round, median over rounds (1 in the clear). */
  ratioToClear: number;
  cpu: CpuPerRequest;
  roundsRps: number[];
  roundsRatio: number[];
}

interface EncryptionCase {
  id: string;
  mode: EncryptionMode;
  bytes: number;
  sealed: boolean;
  path: string;
}

type Measured = LoadResult & { executions: number; cpu: CpuPerRequest };

/** The id of the same case in the clear. */
const clearIdOf = (benchCase: EncryptionCase) => `${benchCase.mode}-${benchCase.bytes}-clear`;

/**
 * Runs one case once: empties the tables (primes the key of a replay case and checks that its
 * record is sealed exactly when the route's server has `encryption`), warms up, empties them
 * again, then measures — as the throughput phase measures its cases.
 */
async function measureCase(
  server: BenchServer,
  db: BenchDatabase,
  benchCase: EncryptionCase,
  settings: EncryptionSettings,
  warmupSeconds: number,
): Promise<Measured> {
  await db.reset();
  let key: KeyMode = { kind: 'fresh', prefix: benchCase.id };
  if (benchCase.mode === 'replay') {
    key = { kind: 'fixed', key: `${benchCase.id}-${randomBytes(6).toString('hex')}` };
    await primeReplayKey(server, benchCase.path, key.key);
    const sealedWith = await db.recordSealedWith(key.key);
    if ((sealedWith !== null) !== benchCase.sealed) {
      throw new Error(
        `${benchCase.path}: its record is ${sealedWith === null ? 'not sealed' : `sealed with "${sealedWith}"`}, ` +
          `expected ${benchCase.sealed ? 'sealed' : 'in the clear'}`,
      );
    }
  }
  const load = {
    url: server.url,
    routes: [{ path: benchCase.path, key }],
    body: BENCH_BODY,
    connections: settings.connections,
  };
  await runLoad({ ...load, durationSeconds: warmupSeconds });
  if (benchCase.mode === 'first') await db.reset();
  const before = await db.countEntries();
  const cpuBefore = await cpuSnapshot(server.pid, db);
  const result = await runLoad({ ...load, durationSeconds: settings.durationSeconds });
  const cpu = cpuPerRequest(cpuBefore, await cpuSnapshot(server.pid, db), result.responses);
  return { ...result, executions: (await db.countEntries()) - before, cpu };
}

/** The encryption phase's two servers, on one database: the same app in two configurations. */
export interface EncryptionServers {
  /** `BENCH_IDEMPOTENCY=clear`: `/sized/<bytes>`. */
  clear: BenchServer;
  /** `BENCH_IDEMPOTENCY=sealed`: `/sealed/<bytes>`. */
  sealed: BenchServer;
}

/**
 * The cost of encryption at rest: first executions and replays of one route answering a 1 KB
 * and a 64 KB body, on two servers whose idempotency configurations differ only in `encryption`
 * (`/sized/<bytes>` in the clear, `/sealed/<bytes>` sealed; bench/app/sized-body.module.ts,
 * bench/app/bench-idempotency.options.ts). Both have the replay cache off, so every replay reads its record from
 * PostgreSQL and, sealed, opens it. Each case in the clear runs right before its sealed twin,
 * the pairs interleaved in rounds; req/s is the median over rounds, the ratio to the clear
 * twin the median of each round's ratio, CPU per request the median over rounds, and the rest
 * comes from the round with the median req/s.
 *
 * @param log - progress lines
 */
export async function runEncryptionPhase(
  servers: EncryptionServers,
  db: BenchDatabase,
  settings: EncryptionSettings,
  log: (line: string) => void,
): Promise<EncryptionRow[]> {
  const cases: EncryptionCase[] = [];
  for (const bytes of SIZED_BODY_BYTES) {
    for (const mode of ['first', 'replay'] as const) {
      for (const sealed of [false, true]) {
        const prefix = sealed ? SIZED_BODY_PREFIXES.sealed : SIZED_BODY_PREFIXES.clear;
        const id = `${mode}-${bytes}-${sealed ? 'sealed' : 'clear'}`;
        cases.push({ id, mode, bytes, sealed, path: `/${prefix}/${bytes}` });
      }
    }
  }
  const rounds: Map<string, Measured>[] = [];
  for (let round = 1; round <= settings.rounds; round++) {
    const warmup = round === 1 ? settings.warmupSeconds : Math.min(1, settings.warmupSeconds);
    const results = new Map<string, Measured>();
    for (const benchCase of cases) {
      const server = benchCase.sealed ? servers.sealed : servers.clear;
      const result = await measureCase(server, db, benchCase, settings, warmup);
      results.set(benchCase.id, result);
      log(
        `  ${server.adapter} ${benchCase.mode} ${benchCase.bytes} B ${benchCase.sealed ? 'sealed' : 'clear'}` +
          `${settings.rounds > 1 ? ` (round ${round})` : ''}: ${result.rps.toFixed(0)} req/s, ` +
          `p50 ${result.latency.p50.toFixed(2)} ms, p99 ${result.latency.p99.toFixed(2)} ms, ` +
          `CPU/req server ${result.cpu.serverUs.toFixed(0)} µs PostgreSQL ${result.cpu.postgresUs.toFixed(0)} µs, ` +
          `executions ${result.executions}, statuses ${JSON.stringify(result.statuses)}`,
      );
    }
    rounds.push(results);
  }
  await db.reset();
  return cases.map((benchCase) => {
    const all = rounds.map((round) => round.get(benchCase.id)!);
    const clear = rounds.map((round) => round.get(clearIdOf(benchCase))!);
    const ratios = all.map((result, index) => result.rps / clear[index].rps);
    const rps = median(all.map((result) => result.rps));
    const chosen = [...all].sort((a, b) => Math.abs(a.rps - rps) - Math.abs(b.rps - rps))[0];
    return {
      id: benchCase.id,
      mode: benchCase.mode,
      bytes: benchCase.bytes,
      sealed: benchCase.sealed,
      path: benchCase.path,
      rps,
      latency: chosen.latency,
      responses: chosen.responses,
      statuses: chosen.statuses,
      errors: chosen.errors + chosen.timeouts,
      executions: chosen.executions,
      ratioToClear: median(ratios),
      cpu: medianCpu(all.map((result) => result.cpu)),
      roundsRps: all.map((result) => result.rps),
      roundsRatio: ratios,
    };
  });
}
