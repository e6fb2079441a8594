import type { BenchHealth } from '../../app/health.controller';
import type { BenchDatabase } from '../bench-database';
import { httpJson } from '../http-request';
import { runLoad } from '../load';
import type { BenchServer } from '../server-process';
import { selectedCases } from './bench-routes';
import type { BenchCase } from './bench-routes';
import { warmedUpLoad } from './throughput.phase';

/** Settings of the promises phase. */
export interface PromisesSettings {
  /** Requests counted per case, after as many again of warm-up. */
  requests: number;
  connections: number;
  /** Throughput cases to count (`--cases`); all by default. */
  cases: BenchCase['id'][] | undefined;
}

/** Promises one case's requests created in the server. */
export interface PromisesRow {
  id: BenchCase['id'];
  label: string;
  path: string;
  /** Promises created in the server per request (the count's own reads taken off). */
  perRequest: number;
  /** Requests counted. */
  requests: number;
  /** Responses by status code, of the counted requests. */
  statuses: Record<string, number>;
}

/**
 * Counts the promises the server creates per request of each throughput case (an async_hooks
 * count switched on for this phase only, and off at its end). Unlike req/s and CPU time, the
 * count does not move with the host's load: two builds are compared exactly, and a cut that
 * removes promises shows here even where throughput cannot resolve it.
 */
export async function runPromisesPhase(
  server: BenchServer,
  db: BenchDatabase,
  settings: PromisesSettings,
): Promise<PromisesRow[]> {
  const count = async (promises: 'on' | 'off' | 'read') =>
    (
      await httpJson<BenchHealth>(server.url, {
        method: 'GET',
        path: `/health?promises=${promises}`,
      })
    ).promises ?? NaN;
  const cases = selectedCases(settings.cases, server.peer);
  await count('on');
  try {
    // What one read of the count creates by itself.
    const first = await count('read');
    const read = (await count('read')) - first;
    const rows: PromisesRow[] = [];
    for (const benchCase of cases) {
      const load = await warmedUpLoad(
        server,
        db,
        benchCase,
        settings.connections,
        settings.requests,
      );
      const before = await count('read');
      const result = await runLoad({ ...load, amount: settings.requests });
      const after = await count('read');
      rows.push({
        id: benchCase.id,
        label: benchCase.label,
        path: benchCase.path,
        perRequest: (after - before - read) / result.responses,
        requests: result.responses,
        statuses: result.statuses,
      });
    }
    return rows;
  } finally {
    await count('off');
    await db.reset();
  }
}
