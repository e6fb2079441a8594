import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import type { BenchDatabase } from '../bench-database';
import { httpRequest } from '../http-request';
import type { LatencySummary } from '../latency-stats';
import { summarizeLatencies } from '../latency-stats';
import type { BenchServer } from '../server-process';
import { BENCH_BODY } from './bench-routes';

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
    };
  } finally {
    agent.destroy();
    await db.reset();
  }
}
