import { resolve } from 'node:path';
import type { BenchIdempotencyConfig } from '../app/bench-app.config';
import type { BenchServer, ServerSpawnOptions } from './server-process';
import { startBenchServer } from './server-process';

/** A server a phase starts for itself: its name (in its log file's) and its configuration. */
export interface PhaseServerSpec {
  name: string;
  idempotency: BenchIdempotencyConfig;
}

/** How every server of a phase starts: as the run's own, each with a log of its own. */
export type PhaseServerBase = Omit<ServerSpawnOptions, 'logFile' | 'env'> & { logDir: string };

/**
 * Starts the servers a phase needs beside the run's own, one after the other, each with its one
 * idempotency configuration (`BENCH_IDEMPOTENCY`: an application has one, so what a phase
 * compares runs on servers of its own), runs `use` with them, and stops every one it started,
 * whatever happened. Each server's log is `server-<adapter>-<name>.log` in `base.logDir`.
 *
 * @param log - progress lines
 */
export async function withPhaseServers<T>(
  base: PhaseServerBase,
  specs: readonly PhaseServerSpec[],
  log: (line: string) => void,
  use: (servers: BenchServer[]) => Promise<T>,
): Promise<T> {
  const { logDir, ...spawn } = base;
  const servers: BenchServer[] = [];
  try {
    for (const spec of specs) {
      const server = await startBenchServer({
        ...spawn,
        peerKeyPrefix: `${spawn.peerKeyPrefix}:${spec.name}`,
        logFile: resolve(logDir, `server-${spawn.adapter}-${spec.name}.log`),
        env: { BENCH_IDEMPOTENCY: spec.idempotency },
      });
      servers.push(server);
      log(`[${spawn.adapter}] ${spec.name} server (${spec.idempotency}): pid ${server.pid}`);
    }
    return await use(servers);
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
}
