import { readFile, readdir } from 'node:fs/promises';
import type { BenchDatabase } from './bench-database';
import { median } from './latency-stats';

/** CPU time of the processes taking part, in milliseconds. */
export interface CpuSnapshot {
  at: number;
  server: number;
  /** The server's main thread (the event loop, where the request path runs). */
  serverMain: number;
  /** Per PostgreSQL backend connected to the bench database, by pid. */
  backends: Map<number, number>;
  runner: number;
}

/** CPU spent between two snapshots, per request. */
export interface CpuPerRequest {
  /** Server process (Node, the app and the library), microseconds of CPU per response. */
  serverUs: number;
  /** Of `serverUs`, the main thread's: the rest is V8's helpers (garbage collection, compilers). */
  serverMainUs: number;
  /** PostgreSQL backends of the bench database, microseconds of CPU per response. */
  postgresUs: number;
  /** The runner (autocannon), microseconds of CPU per response. */
  runnerUs: number;
  /** Share of one core the server used over the interval (1 = a full core). */
  serverCores: number;
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

async function processCpuMs(pid: number, thread?: number): Promise<number | undefined> {
  try {
    const path = thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`;
    const stat = await readFile(path, 'utf8');
    // Fields after the command name (which may contain spaces) start at state (field 3).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return undefined; // gone
  }
}

/**
 * CPU time of every thread of a process (its garbage collector's and libuv's included), in
 * nanoseconds, from `/proc/<pid>/task/<tid>/schedstat`: fine enough for one same-key storm
 * (a few tens of milliseconds), which clock ticks of 10 ms are not.
 * @returns `undefined` when the process is gone
 */
export async function processCpuNs(pid: number): Promise<number | undefined> {
  let threads: string[];
  try {
    threads = await readdir(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let ns = 0;
  for (const thread of threads) {
    try {
      ns += Number((await readFile(`/proc/${pid}/task/${thread}/schedstat`, 'utf8')).split(' ')[0]);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return ns;
}

/**
 * Reads the CPU time of the server, of every PostgreSQL backend connected to the bench
 * database, and of this process, from `/proc` (Linux only).
 */
export async function cpuSnapshot(serverPid: number, db: BenchDatabase): Promise<CpuSnapshot> {
  const backends = new Map<number, number>();
  for (const pid of await db.backendPids()) {
    const ms = await processCpuMs(pid);
    if (ms !== undefined) backends.set(pid, ms);
  }
  const usage = process.cpuUsage();
  return {
    at: performance.now(),
    server: (await processCpuMs(serverPid)) ?? 0,
    // A process's main thread has the process's id.
    serverMain: (await processCpuMs(serverPid, serverPid)) ?? 0,
    backends,
    runner: (usage.user + usage.system) / 1000,
  };
}

/**
 * CPU per response between two snapshots. Backends that connected in between count from zero;
 * backends that disconnected in between are missed (the pool keeps busy connections open).
 */
export function cpuPerRequest(
  before: CpuSnapshot,
  after: CpuSnapshot,
  responses: number,
): CpuPerRequest {
  let postgres = 0;
  for (const [pid, ms] of after.backends) postgres += ms - (before.backends.get(pid) ?? 0);
  const per = (ms: number) => (responses > 0 ? (ms * 1000) / responses : 0);
  return {
    serverUs: per(after.server - before.server),
    serverMainUs: per(after.serverMain - before.serverMain),
    postgresUs: per(postgres),
    runnerUs: per(after.runner - before.runner),
    serverCores: (after.server - before.server) / (after.at - before.at),
  };
}

/**
 * The median of each figure over a case's rounds: one round's CPU, read in clock ticks over a
 * few seconds, moves with the host as much as its req/s does.
 */
export function medianCpu(rounds: readonly CpuPerRequest[]): CpuPerRequest {
  const of = (part: keyof CpuPerRequest) => median(rounds.map((round) => round[part]));
  return {
    serverUs: of('serverUs'),
    serverMainUs: of('serverMainUs'),
    postgresUs: of('postgresUs'),
    runnerUs: of('runnerUs'),
    serverCores: of('serverCores'),
  };
}

/** A run's server CPU per request, for a progress line: `CPU/req server 455 µs (main thread 400)`. */
export function serverCpuText(cpu: CpuPerRequest): string {
  return `CPU/req server ${cpu.serverUs.toFixed(0)} µs (main thread ${cpu.serverMainUs.toFixed(0)})`;
}
