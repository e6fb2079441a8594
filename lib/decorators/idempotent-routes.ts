import { RequestMethod } from '@nestjs/common';
import { methodsOf, ROUTE_PATH_METADATA } from './handler-start';
import { isIdempotencySkipped } from './skip-idempotency.decorator';
import { IDEMPOTENT_CLASS_METADATA, IDEMPOTENT_METADATA } from '../config/idempotency.constants';
import type { FlatIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';

/** Nest's metadata key of a route's method (`@nestjs/common/constants`, stable across 11/12). */
const METHOD_METADATA = 'method';

/** A route a controller serves that `@Idempotent()` names, on its class or its handler. */
export interface IdempotentRouteDeclaration {
  /** The handler's property name on the controller. */
  name: string | symbol;
  /** The handler, the controller's own or the one it inherits. */
  handler: (...args: unknown[]) => unknown;
  /** The route's method, as Nest's `RequestMethod`. */
  method: RequestMethod;
  /** Where it is served, as `METHOD /path`, one entry per path. */
  labels: string[];
  /** The options of a class-level `@Idempotent()` (own or a base class's). */
  onClass?: FlatIdempotencyRouteOptions;
  /** The options of the handler's own `@Idempotent()`. */
  onHandler?: FlatIdempotencyRouteOptions;
}

/**
 * The routes of a controller (own and inherited) that carry `@Idempotent()` on the class or the
 * handler, for the warnings given at bootstrap and the OpenAPI documentation. A handler under `@SkipIdempotency()` is left out.
 * @param controller - a controller class
 */
export function idempotentRoutesOf(
  controller: abstract new (...args: any[]) => unknown,
): IdempotentRouteDeclaration[] {
  const onClass = Reflect.getMetadata(IDEMPOTENT_CLASS_METADATA, controller);
  const routes: IdempotentRouteDeclaration[] = [];
  for (const [name, { value: handler }] of methodsOf(controller)) {
    if (isIdempotencySkipped(handler)) continue;
    const method: RequestMethod | undefined = Reflect.getMetadata(METHOD_METADATA, handler);
    const onHandler = Reflect.getMetadata(IDEMPOTENT_METADATA, handler);
    if (method === undefined || (!onClass && !onHandler)) continue;
    const labels = pathsOf(controller, handler).map((path) => `${RequestMethod[method]} ${path}`);
    routes.push({ name, handler, method, labels, onClass, onHandler });
  }
  return routes;
}

/** The paths a handler is served at: each controller path joined with each of its own. */
function pathsOf(controller: object, handler: object): string[] {
  const list = (value: unknown): string[] =>
    Array.isArray(value) ? value.map(String) : [value === undefined ? '' : String(value)];
  const prefixes = list(Reflect.getMetadata(ROUTE_PATH_METADATA, controller));
  const own = list(Reflect.getMetadata(ROUTE_PATH_METADATA, handler));
  return prefixes.flatMap((prefix) =>
    own.map((path) => `/${prefix}/${path}`.replace(/\/+/g, '/').replace(/(.)\/$/, '$1')),
  );
}
