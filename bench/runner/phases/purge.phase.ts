import type { BenchPurgeResult } from '../../app/purge.controller';
import type { BenchDatabase } from '../bench-database';
import { httpJson } from '../http-request';
import type { LoadResult } from '../load';
import { runLoad, startLoad } from '../load';
import type { BenchServer } from '../server-process';
import { BENCH_BODY, ROUTES } from './bench-routes';

/** One purge of a seeded backlog. */
export interface PurgeRun {
  seeded: number;
  /** Milliseconds of the `INSERT … SELECT generate_series` and of the `VACUUM (ANALYZE)`. */
  insertMs: number;
  vacuumMs: number;
  deleted: number;
  durationMs: number;
  rowsPerSecond: number;
  /** Expired records left after the purge (should be 0). */
  leftExpired: number;
}

/** The purge measured alone and under first-execution load. */
export interface PurgeResult {
  idle: PurgeRun;
  underLoad: PurgeRun;
  /** First executions on /idempotent with the backlog in place, no purge running. */
  claimIdle: LoadResult;
  /** The same load, recorded while the purge ran. */
  claimDuringPurge: LoadResult;
  /** `claimDuringPurge.p99 / claimIdle.p99` */
  p99Ratio: number;
}

/** Settings of the purge phase. */
export interface PurgeSettings {
  rows: number;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
}

/** Runs the purge in the server and reads back what is left. */
async function purgeInServer(
  server: BenchServer,
  db: BenchDatabase,
  seeded: { rows: number; insertMs: number; vacuumMs: number },
): Promise<PurgeRun> {
  const purge = await httpJson<BenchPurgeResult>(server.url, {
    method: 'POST',
    path: '/admin/purge',
  });
  return {
    seeded: seeded.rows,
    insertMs: seeded.insertMs,
    vacuumMs: seeded.vacuumMs,
    deleted: purge.deleted,
    durationMs: purge.durationMs,
    rowsPerSecond: purge.deleted / (purge.durationMs / 1000),
    leftExpired: await db.countExpiredRecords(),
  };
}

/**
 * Seeds `rows` expired records, then runs the library's purge in the server
 * (`IdempotencyPurgeService.purgeExpired()` through `POST /admin/purge`) twice: once alone, for
 * its rate, and once while first executions hit `/idempotent`, comparing their p99 with the
 * same load on the same backlog without a purge.
 *
 * @param log - progress lines
 */
export async function runPurgePhase(
  server: BenchServer,
  db: BenchDatabase,
  settings: PurgeSettings,
  log: (line: string) => void,
): Promise<PurgeResult> {
  await db.reset();
  let seeded = await db.seedExpiredRecords(settings.rows);
  log(
    `  ${server.adapter} seeded ${settings.rows} expired records: insert ${seeded.insertMs.toFixed(0)} ms, ` +
      `vacuum ${seeded.vacuumMs.toFixed(0)} ms`,
  );
  const idle = await purgeInServer(server, db, { rows: settings.rows, ...seeded });
  log(
    `  ${server.adapter} purge alone: ${idle.deleted} in ${idle.durationMs.toFixed(0)} ms ` +
      `(${idle.rowsPerSecond.toFixed(0)} rows/s)`,
  );

  await db.reset();
  seeded = await db.seedExpiredRecords(settings.rows);
  const load = {
    url: server.url,
    routes: [{ path: ROUTES.idempotent, key: { kind: 'fresh' as const, prefix: 'purge' } }],
    body: BENCH_BODY,
    connections: settings.connections,
  };
  await runLoad({ ...load, durationSeconds: settings.warmupSeconds });
  const claimIdle = await runLoad({ ...load, durationSeconds: settings.durationSeconds });

  const running = startLoad({ ...load, durationSeconds: 3600, recordFromStart: false });
  await new Promise((resolve) => setTimeout(resolve, Math.max(500, settings.warmupSeconds * 500)));
  running.setRecording(true);
  let underLoad: PurgeRun;
  try {
    underLoad = await purgeInServer(server, db, { rows: settings.rows, ...seeded });
  } finally {
    running.setRecording(false);
    running.stop();
  }
  const claimDuringPurge = await running.done;
  log(
    `  ${server.adapter} purge under load: ${underLoad.deleted} in ${underLoad.durationMs.toFixed(0)} ms ` +
      `(${underLoad.rowsPerSecond.toFixed(0)} rows/s); claim p99 idle ${claimIdle.latency.p99.toFixed(2)} ms, ` +
      `during purge ${claimDuringPurge.latency.p99.toFixed(2)} ms`,
  );
  await db.reset();
  return {
    idle,
    underLoad,
    claimIdle,
    claimDuringPurge,
    p99Ratio: claimDuringPurge.latency.p99 / claimIdle.latency.p99,
  };
}
