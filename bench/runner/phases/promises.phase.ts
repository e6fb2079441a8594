import type { BenchHealth } from '../../app/health.controller';
import type { BenchDatabase } from '../bench-database';
import { httpJson } from '../http-request';
import { runLoad, summedStatuses } from '../load';
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

/** Promises one case's requests created in the server, and the bytes they allocated. */
export interface PromisesRow {
  id: BenchCase['id'];
  label: string;
  path: string;
  /** Promises created in the server per request (the count's own reads taken off). */
  perRequest: number;
  /**
   * Bytes the server allocated on V8's heap per request, in a window of its own with the
   * promise count off (V8's estimate from samples every 4 KiB on average).
   */
  allocatedPerRequest: number;
  /** Requests counted (in each of the two windows). */
  requests: number;
  /** Responses by status code, of the counted requests (both windows). */
  statuses: Record<string, number>;
}

/**
 * Counts the promises the server creates per request of each throughput case (an async_hooks
 * count switched on for its window only), and estimates the bytes it allocates per request in a
 * window of its own before it (V8's sampling heap profiler, with the count off: its hook
 * allocates too). Unlike req/s and CPU time, neither moves with the host's load: two builds are
 * compared exactly, and a cut that removes promises or garbage shows here even where throughput
 * cannot resolve it.
 */
export async function runPromisesPhase(
  server: BenchServer,
  db: BenchDatabase,
  settings: PromisesSettings,
): Promise<PromisesRow[]> {
  const health = (query: string) =>
    httpJson<BenchHealth>(server.url, { method: 'GET', path: `/health?${query}` });
  const count = async (promises: 'on' | 'off' | 'read') =>
    (await health(`promises=${promises}`)).promises ?? NaN;
  const cases = selectedCases(settings.cases, server.peer);
  try {
    // What one read of the count creates by itself.
    await count('on');
    const first = await count('read');
    const read = (await count('read')) - first;
    await count('off');
    const rows: PromisesRow[] = [];
    for (const benchCase of cases) {
      const load = await warmedUpLoad(
        server,
        db,
        benchCase,
        settings.connections,
        settings.requests,
      );
      // The sampler's own requests allocate a few kilobytes: nothing against a window's
      // requests times tens of kilobytes each.
      await health('allocations=on');
      const sampled = await runLoad({ ...load, amount: settings.requests });
      const allocated = (await health('allocations=off')).allocatedBytes ?? NaN;
      await count('on');
      const before = await count('read');
      const result = await runLoad({ ...load, amount: settings.requests });
      const after = await count('read');
      await count('off');
      rows.push({
        id: benchCase.id,
        label: benchCase.label,
        path: benchCase.path,
        perRequest: (after - before - read) / result.responses,
        allocatedPerRequest: allocated / sampled.responses,
        requests: result.responses,
        statuses: summedStatuses([sampled, result]),
      });
    }
    return rows;
  } finally {
    await count('off');
    await health('allocations=off');
    await db.reset();
  }
}
