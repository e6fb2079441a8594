import { fellBack, internalEnabled } from './internal-switch';

/** V8's major versions (Node 20 to 24) on which the shared dictionary map was measured. */
const MEASURED_V8 = [11, 12, 13];

/** A property no other code names: added and deleted at once. */
const PROBE = Symbol('idempotency.shared-shape');

/**
 * Whether `shareShape` runs: on, and on a V8 whose behaviour was measured (`v8` is
 * `process.versions.v8`). Another V8 may keep maps otherwise: the plain path, said once.
 */
export function sharedShapeOn(v8: string = process.versions.v8): boolean {
  if (!internalEnabled('shared-shape')) return false;
  if (MEASURED_V8.includes(Number(v8.split('.')[0]))) return true;
  fellBack('shared-shape', `V8 ${v8} was not measured (majors ${MEASURED_V8.join(', ')})`);
  return false;
}

/**
 * Gives an object that has a hidden class (V8 map) of its own the one all such objects share.
 * Express 5 sets each request's and response's prototype with `Object.setPrototypeOf` and then
 * adds properties to it (`res.locals`); V8 then gives every response a map no other object has,
 * so each property read on it — in Express, in Node's `ServerResponse`, here — misses its inline
 * cache. Adding a property and deleting it turns such an object into a dictionary whose map is
 * shared, and the caches hit again. Nothing a program can see changes: its properties, their
 * order and its prototype. Gain and check: docs/design/internals.md.
 * @param target - an Express request or response, before the library reads or hooks it
 */
export function shareShape(target: object): void {
  (target as Record<symbol, unknown>)[PROBE] = true;
  delete (target as Record<symbol, unknown>)[PROBE];
}
