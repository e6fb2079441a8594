import { idempotencyRunScopes } from '../context/idempotency-run-scope';
import { IDEMPOTENT_CLASS_METADATA } from '../config/idempotency.constants';
import { isIdempotencySkipped } from './skip-idempotency.decorator';

const MARKED = Symbol('nest-idempotency:marks-handler-start');

/** Metadata key Nest's route decorators (`@Post()`, …) set on a handler. */
export const ROUTE_PATH_METADATA = 'path';

/**
 * A handler that tells the library when its body starts, so a request rejected before that (by
 * a pipe) is not stored and its key stays usable. Metadata set on the original function by
 * other decorators is carried over.
 */
export function markingStart(
  original: (...args: unknown[]) => unknown,
): (...args: unknown[]) => unknown {
  const wrapped = function (this: unknown, ...args: unknown[]) {
    const state = idempotencyRunScopes.current();
    if (state) state.handlerStarted = true;
    return original.apply(this, args);
  };
  Object.defineProperty(wrapped, 'name', { value: original.name });
  for (const key of Reflect.getOwnMetadataKeys(original)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapped);
  }
  (wrapped as any)[MARKED] = true;
  return wrapped;
}

/**
 * Whether a route handler tells the library when it starts. Handlers it cannot mark (a route
 * declared in a subclass of a class-decorated base) are treated as started whatever happened,
 * so no outcome of theirs ever frees the key.
 * @param handler - `ExecutionContext.getHandler()`
 */
export function isHandlerStartMarked(handler: unknown): boolean {
  return typeof handler === 'function' && (handler as any)[MARKED] === true;
}

/**
 * The methods a controller has, its own and those it inherits (from a base class or a mixin),
 * once per name: the nearest definition wins.
 */
export function* methodsOf(
  controller: abstract new (...args: any[]) => unknown,
): Generator<[name: string | symbol, method: PropertyDescriptor]> {
  const seen = new Set<string | symbol>(['constructor']);
  for (let p = controller.prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Reflect.ownKeys(p)) {
      if (seen.has(name)) continue;
      seen.add(name);
      const method = Object.getOwnPropertyDescriptor(p, name);
      if (typeof method?.value === 'function') yield [name, method];
    }
  }
}

/**
 * Marks the route handlers of every controller covered by a class-level `@Idempotent()`, on the
 * class itself or on a base class (whose subclasses' routes do not exist yet when the decorator
 * runs). Called at bootstrap, once the controllers are known and before Nest reads their
 * handlers to register routes. A handler-level `@Idempotent()` marks its own method.
 * @param controllers - the application's controller classes
 */
export function markCoveredControllers(controllers: Iterable<unknown>): void {
  for (const controller of controllers) {
    if (typeof controller !== 'function') continue;
    if (Reflect.getMetadata(IDEMPOTENT_CLASS_METADATA, controller) === undefined) continue;
    // Every route handler it serves, its own and inherited: an inherited one gets a marking
    // copy on the controller, so the base class itself is left as it was.
    for (const [name, method] of methodsOf(controller as abstract new () => unknown)) {
      const fn = method.value;
      if (fn[MARKED] || !Reflect.hasOwnMetadata(ROUTE_PATH_METADATA, fn)) continue;
      // Not covered: the library never runs around it, so the handler is left as declared.
      if (isIdempotencySkipped(fn)) continue;
      Object.defineProperty(controller.prototype, name, { ...method, value: markingStart(fn) });
    }
  }
}
