import { Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import { callTransportAdapter } from '../calls/call-transport.adapter';
import { callTransportOf } from '../calls/idempotency-call-transport';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { IdempotencyExecutionFactory } from '../execution/idempotency-execution.factory';
import { IdempotencyRunner } from '../execution/idempotency-runner';
import type { IdempotencyCallInput, IdempotencyTransport } from '../execution/idempotency-runner';
import { fingerprintOf } from '../execution/request-fingerprint';
import { ResponseAdapterResolver } from '../http/response-adapter.resolver';
import { keySourceOf } from '../decorators/idempotency-key-source';
import { IdempotencyRouteOptionsResolver } from '../decorators/idempotency-route-options.resolver';
import { routeLabelOf } from '../utils/route-label';
import { UnparsedContentTypeWarnings } from '../utils/unparsed-content-types';
import type { WaitingRequest } from '../execution/wait-for-claim';

/**
 * Runs `@Idempotent()` routes through the `IdempotencyRunner`: an HTTP request through this
 * file's HTTP transport, a message or a GraphQL mutation through the call transport its
 * decorator set. Bound to routes by `@Idempotent()`; runs after the guard and before pipes.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  /** Warns about unparsed bodies once per media type, for a bounded number of types. */
  private readonly unparsedTypes = new UnparsedContentTypeWarnings(this.logger);
  /** How an HTTP request is read and answered. */
  private readonly http: IdempotencyTransport = {
    // The key header, or the key source a decorator gave the route (a webhook's event id).
    read: (context, route): IdempotencyCallInput => {
      const request = context.switchToHttp().getRequest();
      const source = keySourceOf(context.getHandler());
      return {
        key: source.read(request, route),
        keyPlace: source.keyPlace ?? route.header,
        method: request.method,
        path: request.originalUrl ?? request.url,
        label: routeLabelOf(request),
        scopeSource: request,
        namespace: source.namespace,
        fingerprint: (scope) =>
          source.fingerprint?.(request, scope) ??
          fingerprintOf(request, route, scope, this.unparsedTypes),
      };
    },
    start: (context, route, won) => this.executions.start(context, route, won),
    // A request that may wait, with its answer's Node.js response and headers as its adapter
    // has them.
    waiting: (context, scope, key, route): WaitingRequest => {
      const http = context.switchToHttp();
      const response = http.getResponse();
      const adapter = this.responses.get();
      const setHeader = (name: string, value: string) => adapter.setHeader(response, name, value);
      const nodeResponse = adapter.nodeResponse(response);
      return { request: http.getRequest(), nodeResponse, setHeader, scope, key, route };
    },
    run: (execution, next) => execution.handle(next),
    // Writes the stored response now, whatever the route's style.
    replay: (context, replay) => {
      this.responses.get().writeReplay(context.switchToHttp().getResponse(), replay.response);
      return of(undefined);
    },
    refuse: (problem) => problem,
  };

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly routes: IdempotencyRouteOptionsResolver,
    private readonly runner: IdempotencyRunner,
    private readonly executions: IdempotencyExecutionFactory,
    private readonly responses: ResponseAdapterResolver,
  ) {}

  /** @inheritDoc */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.getType() === 'http';
    const method = http ? context.switchToHttp().getRequest().method : context.getType();
    const route = this.routes.resolve(context, method);
    if (!route) return next.handle();
    return this.runner.run(context, next, route, http ? this.http : this.callTransport(context));
  }

  /** The call transport of a message or a mutation, as the runner's transport. */
  private callTransport(context: ExecutionContext): IdempotencyTransport {
    const transport = callTransportOf(context.getHandler());
    if (!transport) {
      const handler = `${context.getClass().name}.${context.getHandler().name}`;
      throw IdempotencyConfigurationError.noCallTransport(context.getType(), handler);
    }
    return callTransportAdapter(transport, this.executions);
  }
}
