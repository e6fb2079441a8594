import { Injectable } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { ResponseAdapterResolver } from '../http/response-adapter.resolver';
import { IdempotencyRouteOptionsResolver } from '../decorators/idempotency-route-options.resolver';

/**
 * Prepares a decorated route's request and response for the response adapter, with the route's
 * guards, before anything else reads them. The key itself is read once, by the interceptor,
 * which runs after every guard and before pipes: a request with no key (on a route that
 * requires one) or a malformed key still never reaches validation or the handler.
 */
@Injectable()
export class IdempotencyGuard implements CanActivate {
  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly routes: IdempotencyRouteOptionsResolver,
    private readonly responses: ResponseAdapterResolver,
  ) {}

  /** @inheritDoc */
  canActivate(context: ExecutionContext): boolean {
    // A message or a mutation: its transport reads it.
    if (context.getType() !== 'http') return true;
    const http = context.switchToHttp();
    const request = http.getRequest();
    if (this.routes.resolve(context, request.method)) {
      this.responses.get().prepare(request, http.getResponse());
    }
    return true;
  }
}
