/** A property no other code names: added and deleted at once. */
const PROBE = Symbol('idempotency.shared-shape');

/**
 * Gives an object that has a hidden class (V8 map) of its own the one all such objects share.
 * Express 5 sets each request's and response's prototype with `Object.setPrototypeOf` and then
 * adds properties to it (`res.locals`); V8 then gives every response a map no other object has,
 * so each property read on it — in Express, in Node's `ServerResponse`, here — misses its inline
 * cache and is looked up the slow way. Adding a property and deleting it turns such an object
 * into a dictionary whose map is shared, and the caches hit again; an object whose map is shared
 * already (Fastify's raw response, Node's own) takes the deletion's fast path back to the map it
 * had. Nothing else about the object changes: its properties, their order and its prototype.
 * Measured in docs: BENCHMARKS.md, "An Express response's shape".
 * @param target - an Express request or response, before the library reads or hooks it
 */
export function shareShape(target: object): void {
  (target as Record<symbol, unknown>)[PROBE] = true;
  delete (target as Record<symbol, unknown>)[PROBE];
}
