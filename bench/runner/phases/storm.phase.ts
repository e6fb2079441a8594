import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchDatabase } from '../bench-database';
import { processCpuNs } from '../cpu-usage';
import { httpRequest } from '../http-request';
import type { LatencySummary } from '../latency-stats';
import { median, summarizeLatencies } from '../latency-stats';
import type { BenchServer } from '../server-process';
import { BENCH_BODY } from './bench-routes';

/** How long the server is left to settle before and after a storm's CPU is read. */
const CPU_SETTLE_MS = 30;

/** What a same-key storm did. */
export interface StormResult {
  path: string;
  requests: number;
  /** Handler executions, counted from the rows the handler inserted. */
  executions: number;
  statuses: Record<string, number>;
  /** Responses carrying `Idempotent-Replayed: true`. */
  replayed: number;
  latency: LatencySummary;
  /** From the first request written to the last response. */
  wallMs: number;
  /**
   * Server CPU (all its threads) from just before the first request to shortly after the last
   * response: what the storm cost the server, steadier than its p99 on a shared host.
   */
  serverCpuMs?: number;
  /**
   * Every round of this storm, in order, when it ran in interleaved rounds (`--rounds`); the
   * fields above are then those of the round with the median p99.
   */
  rounds?: StormRound[];
  /** Per round, this storm's p99 over the bare 409 storm's p99 in the same round. */
  p99ToFloor?: number[];
  /** Per round, this storm's server CPU over the bare 409 storm's in the same round. */
  cpuToFloor?: number[];
}

/** What one round of a storm did: what the targets check in every round. */
export interface StormRound {
  executions: number;
  statuses: Record<string, number>;
  p99: number;
  serverCpuMs?: number;
}

/**
 * One result per storm path from storms run in interleaved rounds (each round: every path once,
 * the floor first): the round with the median p99 stands for the path, with every round kept
 * and each round's p99 set against the floor's of that round.
 * @param rounds - per round, the storms in the same path order
 * @param floorPath - the bare 409 storm's path
 */
export function combineStormRounds(rounds: StormResult[][], floorPath: string): StormResult[] {
  const floors = rounds.map((round) => round.find((s) => s.path === floorPath));
  return rounds[0].map((_, i) => {
    const all = rounds.map((round) => round[i]);
    const p99s = all.map((storm) => storm.latency.p99);
    const middle = median(p99s);
    const representative = all.reduce((best, storm) =>
      Math.abs(storm.latency.p99 - middle) < Math.abs(best.latency.p99 - middle) ? storm : best,
    );
    return {
      ...representative,
      rounds: all.map(({ executions, statuses, latency, serverCpuMs }) => ({
        executions,
        statuses,
        p99: latency.p99,
        serverCpuMs,
      })),
      p99ToFloor: all.flatMap((storm, k) => {
        const floor = floors[k]?.latency.p99;
        return floor ? [storm.latency.p99 / floor] : [];
      }),
      cpuToFloor: all.flatMap((storm, k) => {
        const floor = floors[k]?.serverCpuMs;
        return floor && storm.serverCpuMs !== undefined ? [storm.serverCpuMs / floor] : [];
      }),
    };
  });
}

/**
 * Sends `size` identical requests with one Idempotency-Key at the same instant. The
 * connections are opened beforehand (a GET /health on each), so the storm measures the
 * server rather than TCP accept queues.
 */
export async function runStorm(
  server: BenchServer,
  db: BenchDatabase,
  path: string,
  size: number,
): Promise<StormResult> {
  await db.reset();
  const agent = new Agent({ keepAlive: true, maxSockets: size, maxFreeSockets: size });
  try {
    await Promise.all(
      Array.from({ length: size }, () =>
        httpRequest(server.url, { method: 'GET', path: '/health', agent }),
      ),
    );
    const key = `storm-${randomBytes(8).toString('hex')}`;
    // The server is left to finish with the connections' requests before its CPU is read.
    await sleep(CPU_SETTLE_MS);
    const cpuBefore = await processCpuNs(server.pid);
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: size }, () =>
        httpRequest(server.url, {
          method: 'POST',
          path,
          body: BENCH_BODY,
          headers: { 'idempotency-key': key },
          agent,
        }),
      ),
    );
    const wallMs = performance.now() - started;
    // The winner's completion and the last responses' own work are part of the storm.
    await sleep(CPU_SETTLE_MS);
    const cpuAfter = await processCpuNs(server.pid);
    const statuses: Record<string, number> = {};
    let replayed = 0;
    for (const answer of answers) {
      statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
      if (String(answer.headers['idempotent-replayed']) === 'true') replayed++;
    }
    const executions = await db.countEntries();
    return {
      path,
      requests: size,
      executions,
      statuses,
      replayed,
      latency: summarizeLatencies(answers.map((answer) => answer.ms)),
      wallMs,
      serverCpuMs:
        cpuBefore !== undefined && cpuAfter !== undefined
          ? (cpuAfter - cpuBefore) / 1e6
          : undefined,
    };
  } finally {
    agent.destroy();
    await db.reset();
  }
}
