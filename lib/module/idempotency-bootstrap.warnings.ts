import { Logger, RequestMethod } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../config/idempotency.defaults';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { controllersOf } from '../openapi/idempotency-openapi';
import { idempotentRoutesOf } from './idempotent-routes';

/** Token of the provider that logs the shared-scope warning at bootstrap. */
export const IDEMPOTENCY_SCOPE_WARNING = Symbol('IDEMPOTENCY_SCOPE_WARNING');

/** Token of the provider that warns about `@Idempotent()` on safe methods at bootstrap. */
export const IDEMPOTENCY_SAFE_METHOD_WARNING = Symbol('IDEMPOTENCY_SAFE_METHOD_WARNING');

/**
 * Logs one warning at bootstrap when the default scope (`req.user?.id`) is in force on
 * idempotent routes: every caller without `req.user.id` then shares one key space, so one
 * unauthenticated caller's key replays another's response. Lists those routes (`METHOD path`)
 * and says how to set `scope`. Silent when the module or the route sets a scope: a resolver the
 * application sets has a request it finds no caller for refused (`idempotency_scope_missing`).
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
      'request.scope in IdempotencyModule.forRoot() (or in @Idempotent() on the route) to the ' +
      'caller your authentication identifies, e.g. request: { scope: (req) => ' +
      'req.user.accountId }; a request for which it returns no scope is then refused (400 ' +
      'idempotency_scope_missing). If every request there is authenticated with req.user.id, ' +
      'say so with request: { scope: (req) => req.user.id }; if every caller is meant to share ' +
      'one key space, say so with request: { scope: () => SHARED_SCOPE }.',
  );
  return routes;
}

/** Methods a class-level `@Idempotent()` never covers. */
const SAFE = new Set<number>([RequestMethod.GET, RequestMethod.HEAD, RequestMethod.OPTIONS]);

/** The idempotent routes of a controller (own and inherited) that set no scope of their own. */
function routesWithDefaultScope(controller: abstract new (...args: any[]) => unknown): string[] {
  return idempotentRoutesOf(controller)
    .filter(({ method }) => !SAFE.has(method))
    .filter(
      ({ onClass, onHandler }) => onClass?.scope === undefined && onHandler?.scope === undefined,
    )
    .flatMap((route) => route.labels);
}

/**
 * Logs one warning at bootstrap for each handler that carries `@Idempotent()` on a GET, HEAD or
 * OPTIONS route: those methods are safe, never claimed or stored, so the decorator does nothing
 * there and a reader would think the route protected.
 *
 * @param options - this module instance's resolved options
 * @param modules - the application's modules, to find the routes this instance serves
 * @returns the routes named in the warnings
 */
export function warnAboutSafeMethods(
  options: ResolvedIdempotencyOptions,
  modules: ModulesContainer,
): string[] {
  const routes = controllersOf(options, modules)
    .flatMap(idempotentRoutesOf)
    .filter(({ method, onHandler }) => SAFE.has(method) && onHandler !== undefined)
    .flatMap((route) => route.labels);
  for (const route of routes) {
    new Logger('Idempotency').warn(
      `@Idempotent() on ${route} does nothing: GET, HEAD and OPTIONS are safe methods, which ` +
        'are never claimed, stored or replayed. Remove @Idempotent() from it, or, if the ' +
        'route changes something, serve it as POST, PUT, PATCH or DELETE.',
    );
  }
  return routes;
}
