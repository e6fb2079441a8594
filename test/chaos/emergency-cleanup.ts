/** Cleanups that must run even when the run is interrupted (Ctrl-C) mid-scenario. */
const cleanups = new Set<() => Promise<unknown> | unknown>();

/**
 * Registers a cleanup to run if the harness is interrupted, e.g. "start PostgreSQL again".
 * @returns a function that unregisters it (call it once the normal path has cleaned up)
 */
export function onInterrupt(cleanup: () => Promise<unknown> | unknown): () => void {
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** Runs every registered cleanup, ignoring their failures. */
export async function runInterruptCleanups(): Promise<void> {
  for (const cleanup of [...cleanups]) {
    try {
      await cleanup();
    } catch {
      // best effort: the process is going away
    }
  }
  cleanups.clear();
}
