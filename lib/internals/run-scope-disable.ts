import { AsyncLocalStorage } from 'node:async_hooks';
import { fellBack, internalEnabled } from './internal-switch';

/**
 * Whether the run scopes turn their `AsyncLocalStorage` off once no run is live. Before Node 24 a
 * storage that ran once keeps Node's async hooks on, so every promise of the process (replays,
 * the application's other routes) pays an init hook; `disable()` (documented, experimental)
 * turns them off and the next `run()` on again. Node 24 keeps stores without hooks: nothing to
 * save, the plain path. Checked once: a disabled storage's next `run()` must see its store.
 * Gain: docs/design/internals.md.
 * @param node - `process.versions.node`
 */
export function runScopeDisableOn(node: string = process.versions.node): boolean {
  if (!internalEnabled('run-scope-disable') || Number(node.split('.')[0]) >= 24) return false;
  const probe = new AsyncLocalStorage<true>();
  try {
    probe.run(true, () => undefined);
    probe.disable();
    const seen = probe.run(true, () => probe.getStore());
    probe.disable();
    if (seen === true && probe.getStore() === undefined) return true;
  } catch {
    // A Node without disable(): said below.
  }
  fellBack('run-scope-disable', "AsyncLocalStorage's disable() no longer behaves as measured");
  return false;
}
