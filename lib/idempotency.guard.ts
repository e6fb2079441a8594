import { Injectable } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { IdempotencyProblemException } from './errors/idempotency-problem.exception';
import { IdempotencyEvents } from './events/idempotency.events';
import { ResponseAdapterResolver } from './http/response-adapter.resolver';
import { keySourceOf } from './idempotency-key-source';
import { IdempotencyRouteOptionsResolver } from './idempotency-route-options.resolver';
import { routeLabelOf } from './utils/route-label';

/**
 * Enforces the key header on decorated routes. Runs with the route's guards, before pipes, so a
 * request with no key (on a route that requires one) or a malformed key never reaches
 * validation or the handler: 400 problem+json. The key is read from the route's key source: the
 * header, unless a decorator gave the route another (a webhook's verified event id).
 */
@Injectable()
export class IdempotencyGuard implements CanActivate {
  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly routes: IdempotencyRouteOptionsResolver,
    private readonly events: IdempotencyEvents,
    private readonly responses: ResponseAdapterResolver,
  ) {}

  /** @inheritDoc */
  canActivate(context: ExecutionContext): boolean {
    // A message or a mutation: its transport reads the key, and refusals are its errors.
    if (context.getType() !== 'http') return true;
    const http = context.switchToHttp();
    const request = http.getRequest();
    const route = this.routes.resolve(context, request.method);
    if (!route) return true;
    this.responses.get().prepare(request, http.getResponse());
    const parsed = keySourceOf(context.getHandler()).read(request, route);
    if (parsed.kind === 'missing' && route.required) {
      this.reject(IdempotencyProblemException.keyMissing(route.header), request);
    }
    if (parsed.kind === 'invalid') {
      this.reject(IdempotencyProblemException.keyInvalid(route.header, parsed.reason), request);
    }
    return true;
  }

  private reject(error: IdempotencyProblemException, request: any): never {
    const route = routeLabelOf(request);
    this.events.emit({ type: 'rejected', code: error.code, status: error.getStatus(), route });
    throw error;
  }
}
