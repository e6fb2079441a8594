import { Logger, RequestMethod } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../config/idempotency.defaults';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { controllersOf } from '../openapi/idempotency-openapi';
import { idempotentRoutesOf } from '../decorators/idempotent-routes';

/** Token of the provider that logs the bootstrap warnings (shared scope, safe methods). */
export const IDEMPOTENCY_BOOTSTRAP_WARNINGS = Symbol('IDEMPOTENCY_BOOTSTRAP_WARNINGS');

/** Methods a class-level `@Idempotent()` never covers. */
const SAFE = new Set<number>([RequestMethod.GET, RequestMethod.HEAD, RequestMethod.OPTIONS]);

/**
 * Logs the warnings given at bootstrap about the idempotent routes this module instance serves.
 *
 * One when the default scope (`req.user?.id`) is in force on idempotent routes: every caller
 * without `req.user.id` then shares one key space, so one unauthenticated caller's key replays
 * another's response. It lists those routes (`METHOD path`) and says how to set `scope`. Silent
 * when the module or the route sets a scope: a resolver the application sets has a request it
 * finds no caller for refused (`idempotency_scope_missing`).
 *
 * One for each handler that carries `@Idempotent()` on a GET, HEAD or OPTIONS route: those
 * methods are safe, never claimed or stored, so the decorator does nothing there and a reader
 * would think the route protected.
 *
 * @param options - this module instance's resolved options
 * @param modules - the application's modules, to find the routes this instance serves
 * @returns the routes named in the warnings
 */
export function warnAtBootstrap(
  options: ResolvedIdempotencyOptions,
  modules: ModulesContainer,
): string[] {
  const logger = new Logger('Idempotency');
  const routes = controllersOf(options, modules).flatMap(idempotentRoutesOf);
  const shared =
    options.scope !== DEFAULT_IDEMPOTENCY_OPTIONS.request.scope
      ? []
      : routes
          .filter(({ method }) => !SAFE.has(method))
          .filter(
            ({ onClass, onHandler }) =>
              onClass?.scope === undefined && onHandler?.scope === undefined,
          )
          .flatMap((route) => route.labels);
  if (shared.length > 0) {
    logger.warn(
      `No scope is configured, so callers without req.user.id share one key space on ` +
        `${shared.join(', ')}. One caller's key can replay another caller's stored response. Set ` +
        'request.scope in IdempotencyModule.forRoot() (or in @Idempotent() on the route) to the ' +
        'caller your authentication identifies, e.g. request: { scope: (req) => ' +
        'req.user.accountId }; a request for which it returns no scope is then refused (400 ' +
        'idempotency_scope_missing). If every request there is authenticated with req.user.id, ' +
        'say so with request: { scope: (req) => req.user.id }; if every caller is meant to share ' +
        'one key space, say so with request: { scope: () => SHARED_SCOPE }.',
    );
  }
  const safe = routes
    .filter(({ method, onHandler }) => SAFE.has(method) && onHandler !== undefined)
    .flatMap((route) => route.labels);
  for (const route of safe) {
    logger.warn(
      `@Idempotent() on ${route} does nothing: GET, HEAD and OPTIONS are safe methods, which ` +
        'are never claimed, stored or replayed. Remove @Idempotent() from it, or, if the ' +
        'route changes something, serve it as POST, PUT, PATCH or DELETE.',
    );
  }
  return [...shared, ...safe];
}
