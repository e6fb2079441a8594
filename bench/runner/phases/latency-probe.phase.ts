import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import type { BenchDatabase } from '../bench-database';
import { httpRequest } from '../http-request';
import type { LatencySummary } from '../latency-stats';
import { LatencyRecorder } from '../latency-stats';
import type { BenchServer } from '../server-process';
import type { BenchCase } from './bench-routes';
import { BENCH_BODY, BENCH_CASES } from './bench-routes';
import { primeReplayKey } from './throughput.phase';

/** Unloaded latency of one case. */
export interface ProbeRow {
  id: BenchCase['id'];
  label: string;
  latency: LatencySummary;
  /** `p50 − p50(plain)`, milliseconds. */
  addedP50Ms: number;
  /** Statuses other than 201, if any. */
  unexpected: Record<string, number>;
}

const WARMUP_ITERATIONS = 50;

/**
 * Sends one request at a time over one keep-alive connection, cycling through the cases
 * (plain, first, first-tx, replay, peer…) so that drift on a noisy machine hits every case
 * alike, and times each with `performance.now()`. Gives the latency a request pays with no
 * queueing: the honest measure of "p50 added".
 *
 * @param iterations - requests per case
 * @param peer - whether the server runs the peer route
 */
export async function runLatencyProbe(
  server: BenchServer,
  db: BenchDatabase,
  iterations: number,
  peer: boolean,
): Promise<ProbeRow[]> {
  await db.reset();
  const cases = BENCH_CASES.filter((benchCase) => peer || !benchCase.peer);
  const run = randomBytes(6).toString('hex');
  const fixedKeys = new Map<BenchCase['id'], string>();
  for (const benchCase of cases) {
    if (benchCase.key !== 'fixed') continue;
    const key = `probe-${benchCase.id}-${run}`;
    await primeReplayKey(server, benchCase.path, key);
    fixedKeys.set(benchCase.id, key);
  }
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const recorders = new Map(cases.map((benchCase) => [benchCase.id, new LatencyRecorder()]));
  const unexpected = new Map(
    cases.map((benchCase) => [benchCase.id, {} as Record<string, number>]),
  );
  let sequence = 0;
  try {
    for (let i = -WARMUP_ITERATIONS; i < iterations; i++) {
      for (const benchCase of cases) {
        const headers: Record<string, string> = {};
        if (benchCase.key === 'fresh') headers['idempotency-key'] = `probe-${run}-${++sequence}`;
        if (benchCase.key === 'fixed') headers['idempotency-key'] = fixedKeys.get(benchCase.id)!;
        const answer = await httpRequest(server.url, {
          method: 'POST',
          path: benchCase.path,
          body: BENCH_BODY,
          headers,
          agent,
        });
        if (i < 0) continue;
        recorders.get(benchCase.id)!.record(answer.ms);
        if (answer.status !== 201) {
          const counts = unexpected.get(benchCase.id)!;
          counts[answer.status] = (counts[answer.status] ?? 0) + 1;
        }
      }
    }
  } finally {
    agent.destroy();
  }
  await db.reset();
  const plainP50 = recorders.get('plain')!.summary().p50;
  return cases.map((benchCase) => {
    const latency = recorders.get(benchCase.id)!.summary();
    return {
      id: benchCase.id,
      label: benchCase.label,
      latency,
      addedP50Ms: latency.p50 - plainP50,
      unexpected: unexpected.get(benchCase.id)!,
    };
  });
}
