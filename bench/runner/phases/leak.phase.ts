import { randomBytes } from 'node:crypto';
import type { BenchHealth } from '../../app/health.controller';
import type { BenchDatabase } from '../bench-database';
import { httpJson } from '../http-request';
import type { LoadRoute } from '../load';
import { runLoad } from '../load';
import type { BenchServer } from '../server-process';
import { BENCH_BODY, ROUTES } from './bench-routes';
import { primeReplayKey } from './throughput.phase';

/** Memory of the server after a number of requests, sampled after a full GC. */
export interface LeakSample {
  afterRequests: number;
  /** VmRSS of the server process. */
  rssBytes: number;
  heapUsedBytes: number;
}

/** What the leak check saw. */
export interface LeakResult {
  requests: number;
  /** The routes each connection cycles through. */
  mix: string[];
  /** Warm-up requests sent before the first sample. */
  warmupRequests: number;
  samples: LeakSample[];
  rssGrowthBytes: number;
  heapGrowthBytes: number;
  /** Responses per second over the measured requests. */
  rps: number;
  /** Responses that were not 201 (should be none). */
  unexpected: Record<string, number>;
  seconds: number;
}

const CHUNKS = 4;

const collect = (server: BenchServer) =>
  httpJson<BenchHealth>(server.url, { method: 'GET', path: '/health?gc=1' });

/** Three full GCs a moment apart, so freed pages go back to the OS, then VmRSS and heap. */
async function sample(server: BenchServer, afterRequests: number): Promise<LeakSample> {
  for (let i = 0; i < 2; i++) {
    await collect(server);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const health = await collect(server);
  if (!health.collected) throw new Error('the server was not started with --expose-gc');
  return {
    afterRequests,
    rssBytes: await server.rssBytes(),
    heapUsedBytes: health.memory.heapUsed,
  };
}

/**
 * Sends `requests` requests cycling through first executions on `/idempotent`, first
 * executions on `/idempotent-tx` and replays on `/idempotent`, in four chunks, and samples the
 * server's RSS (VmRSS) and heap after a full GC before, between and after the chunks. A warm-up
 * of a tenth of the requests (at most 20 000) comes first, so the first sample is taken on a
 * warm process.
 */
export async function runLeakCheck(
  server: BenchServer,
  db: BenchDatabase,
  requests: number,
  connections: number,
): Promise<LeakResult> {
  await db.reset();
  const replayKey = `leak-${randomBytes(6).toString('hex')}`;
  await primeReplayKey(server, ROUTES.idempotent, replayKey);
  const routes: LoadRoute[] = [
    { path: ROUTES.idempotent, key: { kind: 'fresh', prefix: 'leak' } },
    { path: ROUTES.idempotentTx, key: { kind: 'fresh', prefix: 'leak-tx' } },
    { path: ROUTES.idempotent, key: { kind: 'fixed', key: replayKey } },
  ];
  const load = { url: server.url, routes, body: BENCH_BODY, connections };
  const warmupRequests = Math.max(connections, Math.min(20_000, Math.round(requests / 10)));
  await runLoad({ ...load, amount: warmupRequests });

  const samples = [await sample(server, 0)];
  const unexpected: Record<string, number> = {};
  let sent = 0;
  let seconds = 0;
  for (let chunk = 1; chunk <= CHUNKS; chunk++) {
    const amount = Math.max(connections, Math.round((requests * chunk) / CHUNKS) - sent);
    const result = await runLoad({ ...load, amount });
    sent += result.responses;
    seconds += result.seconds;
    for (const [status, count] of Object.entries(result.statuses)) {
      if (status !== '201') unexpected[status] = (unexpected[status] ?? 0) + count;
    }
    samples.push(await sample(server, sent));
  }
  await db.reset();
  const first = samples[0];
  const last = samples[samples.length - 1];
  return {
    requests: sent,
    mix: routes.map((route) => `${route.path} (${route.key.kind})`),
    warmupRequests,
    samples,
    rssGrowthBytes: last.rssBytes - first.rssBytes,
    heapGrowthBytes: last.heapUsedBytes - first.heapUsedBytes,
    rps: seconds > 0 ? sent / seconds : 0,
    unexpected,
    seconds,
  };
}
