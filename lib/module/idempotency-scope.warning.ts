import { Logger, RequestMethod } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import { isIdempotencySkipped } from '../decorators/skip-idempotency.decorator';
import { IDEMPOTENT_CLASS_METADATA, IDEMPOTENT_METADATA } from '../config/idempotency.constants';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../config/idempotency.defaults';
import type {
  FlatIdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';
import { controllersOf } from '../openapi/idempotency-openapi';

/** Token of the provider that logs the shared-scope warning at bootstrap. */
export const IDEMPOTENCY_SCOPE_WARNING = Symbol('IDEMPOTENCY_SCOPE_WARNING');

/** Nest's metadata keys for a route (`@nestjs/common/constants`, stable across 11/12). */
const PATH_METADATA = 'path';
const METHOD_METADATA = 'method';

/** Methods a class-level `@Idempotent()` never covers. */
const SAFE = new Set<number>([RequestMethod.GET, RequestMethod.HEAD, RequestMethod.OPTIONS]);

/**
 * Logs one warning at bootstrap when the default scope (`req.user?.id`) is in force on
 * idempotent routes: every caller without `req.user.id` then shares one key space, so one
 * unauthenticated caller's key replays another's response. Lists those routes (`METHOD path`)
 * and says how to set `scope`. Silent when the module or the route sets a scope.
 *
 * @param options - this module instance's resolved options
 * @param modules - the application's modules, to find the routes this instance serves
 * @returns the routes named in the warning (none when nothing was logged)
 */
export function warnAboutSharedScope(
  options: ResolvedIdempotencyOptions,
  modules: ModulesContainer,
): string[] {
  if (options.scope !== DEFAULT_IDEMPOTENCY_OPTIONS.request.scope) return [];
  const routes = controllersOf(options, modules).flatMap(routesWithDefaultScope);
  if (routes.length === 0) return [];
  new Logger('Idempotency').warn(
    `No scope is configured, so callers without req.user.id share one key space on ` +
      `${routes.join(', ')}. One caller's key can replay another caller's stored response. Set ` +
      'request.scope in IdempotencyModule.forRoot() (or in @Idempotent() on the route) to what ' +
      "identifies a caller, e.g. request: { scope: (req) => req.headers['x-api-key'] }. If every " +
      'request there is authenticated with req.user.id, say so with ' +
      'request: { scope: (req) => req.user.id }.',
  );
  return routes;
}

/** The idempotent routes of a controller (own and inherited) that set no scope of their own. */
function routesWithDefaultScope(controller: abstract new (...args: any[]) => unknown): string[] {
  const onClass: FlatIdempotencyRouteOptions | undefined = Reflect.getMetadata(
    IDEMPOTENT_CLASS_METADATA,
    controller,
  );
  const routes: string[] = [];
  const seen = new Set<string | symbol>(['constructor']);
  for (let p = controller.prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Reflect.ownKeys(p)) {
      if (seen.has(name)) continue;
      seen.add(name);
      const handler = Object.getOwnPropertyDescriptor(p, name)?.value;
      if (typeof handler !== 'function') continue;
      const method: number | undefined = Reflect.getMetadata(METHOD_METADATA, handler);
      if (method === undefined || SAFE.has(method) || isIdempotencySkipped(handler)) continue;
      const onHandler: FlatIdempotencyRouteOptions | undefined = Reflect.getMetadata(
        IDEMPOTENT_METADATA,
        handler,
      );
      if (!onClass && !onHandler) continue;
      if (onClass?.scope !== undefined || onHandler?.scope !== undefined) continue;
      for (const path of pathsOf(controller, handler))
        routes.push(`${RequestMethod[method]} ${path}`);
    }
  }
  return routes;
}

/** The paths a handler is served at: each controller path joined with each of its own. */
function pathsOf(controller: object, handler: object): string[] {
  const list = (value: unknown): string[] =>
    Array.isArray(value) ? value.map(String) : [value === undefined ? '' : String(value)];
  const prefixes = list(Reflect.getMetadata(PATH_METADATA, controller));
  const own = list(Reflect.getMetadata(PATH_METADATA, handler));
  return prefixes.flatMap((prefix) =>
    own.map((path) => `/${prefix}/${path}`.replace(/\/+/g, '/').replace(/(.)\/$/, '$1')),
  );
}
