import { query } from './postgres-pair';
import type { PostgresPair } from './postgres-pair';

/**
 * Cancels every backend's wait for the synchronous standby on the primary every 200 ms, as an
 * operator, a pooler or a watchdog would: each such COMMIT then stands on the primary alone,
 * with a WARNING. Call the returned function to stop.
 */
export function cancelStandbyWaits(pair: PostgresPair): () => Promise<void> {
  let running = true;
  const waits = "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'";
  const loop = (async () => {
    while (running) {
      await query(pair.url('primary'), waits).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return () => {
    running = false;
    return loop;
  };
}
