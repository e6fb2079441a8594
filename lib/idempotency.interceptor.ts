import { Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import { IdempotentCallRunner } from './calls/idempotent-call.runner';
import { IdempotencyConfigurationError } from './errors/idempotency-configuration.error';
import { IdempotencyProblemException } from './errors/idempotency-problem.exception';
import { IdempotencyEvents } from './events/idempotency.events';
import { IdempotencyClaims } from './execution/idempotency-claims';
import type { Claimed, KnownClaimInput, Replay } from './execution/idempotency-claims';
import { IdempotencyExecutionFactory } from './execution/idempotency-execution.factory';
import { fingerprintOf } from './execution/request-fingerprint';
import { ResponseAdapterResolver } from './http/response-adapter.resolver';
import { keySourceOf } from './idempotency-key-source';
import type { IdempotencyKeySource } from './idempotency-key-source';
import { IdempotencyRouteOptionsResolver } from './idempotency-route-options.resolver';
import type { ResolvedIdempotencyRouteOptions } from './interfaces/idempotency-module-options.interface';
import { normaliseScope } from './utils/request-scope';
import { routeLabelOf } from './utils/route-label';
import { UnparsedContentTypeWarnings } from './utils/unparsed-content-types';
import type { WaitingRequest } from './waiting/wait-for-claim';

/**
 * Claims the key, then either replays the stored response or runs the handler through an
 * `IdempotencyExecution`, which owns the rest of the request's life. Bound to routes by
 * `@Idempotent()`; runs after the guard and before pipes.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  /** Requests already handled: a route decorated on its class and its handler binds it twice. */
  private readonly handled = new WeakSet<object>();
  /** Warns about unparsed bodies once per media type, for a bounded number of types. */
  private readonly unparsedTypes = new UnparsedContentTypeWarnings(this.logger);

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly routes: IdempotencyRouteOptionsResolver,
    private readonly claims: IdempotencyClaims,
    private readonly executions: IdempotencyExecutionFactory,
    private readonly responses: ResponseAdapterResolver,
    private readonly events: IdempotencyEvents,
    private readonly calls: IdempotentCallRunner,
  ) {}

  /** @inheritDoc */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    // A message or a GraphQL mutation: the same claim and run, read and answered by its transport.
    if (context.getType() !== 'http') return this.calls.intercept(context, next);
    const request = context.switchToHttp().getRequest();
    const route = this.routes.resolve(context, request.method);
    if (!route || this.handled.has(request)) return next.handle();
    this.handled.add(request);
    // The key header, or the key source a decorator gave the route (a webhook's event id).
    const source = keySourceOf(context.getHandler());
    const key = source.read(request, route);
    // No key on a `required: false` route: unprotected. (The guard refused every other case.)
    if (key.kind !== 'valid') return next.handle();
    const known = this.knownClaim(request, route, key.key, source);
    // A replay from memory, or a refusal this instance can tell alone (thrown): no promise.
    const replay = this.claims.known(known);
    if (replay) return this.replay(context, replay);
    // One observable around the claim and what follows it (not defer + mergeMap: two fewer
    // subscriber layers on every request). A claim that settles after the caller stopped
    // listening (an outer timeout answered first) is given back: see unclaimed().
    return new Observable((subscriber) => {
      this.claim(context, known).then(
        (claimed) => {
          if (subscriber.closed) return void this.unclaimed(claimed);
          try {
            const answer =
              claimed.kind === 'run'
                ? claimed.execution.handle(next)
                : this.replay(context, claimed);
            answer.subscribe(subscriber);
          } catch (error) {
            // A replay that cannot be written (a stored header Node refuses) goes to Nest's
            // error handling, as a throw inside an operator would.
            subscriber.error(error);
          }
        },
        (error: unknown) => subscriber.error(error),
      );
    });
  }

  /** The request's key, scope and fingerprint: what its claim is decided by. */
  private knownClaim(
    request: any,
    route: ResolvedIdempotencyRouteOptions,
    key: string,
    source: IdempotencyKeySource,
  ): KnownClaimInput {
    const scope = this.scopeOf(request, route, source);
    const fingerprint =
      source.fingerprint?.(request, scope) ?? this.fingerprintOf(request, route, scope);
    const label = routeLabelOf(request);
    return { route, keyPlace: source.keyPlace ?? route.header, scope, key, fingerprint, label };
  }

  private claim(context: ExecutionContext, known: KnownClaimInput): Promise<Claimed> {
    const request = context.switchToHttp().getRequest();
    const { route, keyPlace, scope, key, fingerprint, label } = known;
    // Each field named rather than spread from `known`: this runs on every first execution.
    return this.claims.claim({
      route,
      keyPlace,
      scope,
      key,
      fingerprint,
      label,
      method: request.method,
      path: request.originalUrl ?? request.url,
      waiting: () => this.waitingRequest(context, scope, key, label),
      start: (won) => this.executions.start(context, route, won),
    });
  }

  /** A request that may wait, with its answer's Node.js response and headers as its adapter has them. */
  private waitingRequest(
    context: ExecutionContext,
    scope: string,
    key: string,
    route: string,
  ): WaitingRequest {
    const http = context.switchToHttp();
    const response = http.getResponse();
    const adapter = this.responses.get();
    return {
      request: http.getRequest(),
      nodeResponse: adapter.nodeResponse(response),
      setHeader: (name, value) => adapter.setHeader(response, name, value),
      scope,
      key,
      route,
    };
  }

  /**
   * The caller stopped listening before the claim settled (an outer timeout answered first):
   * a key won for a handler that will never run is given back at once rather than held by its
   * lease; a replay has nothing left to do.
   */
  private unclaimed(claimed: Claimed): void {
    if (claimed.kind === 'run') void claimed.execution.abort();
  }

  /** Writes the stored response now, whatever the route's style. */
  private replay(context: ExecutionContext, replay: Replay): Observable<undefined> {
    this.responses.get().writeReplay(context.switchToHttp().getResponse(), replay.response);
    const { scope, key, response, label } = replay;
    this.events.emit({ type: 'replayed', scope, key, status: response.status, route: label });
    return of(undefined);
  }

  private scopeOf(
    request: any,
    route: ResolvedIdempotencyRouteOptions,
    source: IdempotencyKeySource,
  ): string {
    try {
      return normaliseScope(route.scope(request), source.namespace);
    } catch (error) {
      if (!(error instanceof IdempotencyConfigurationError)) throw error;
      this.logger.error(error.message);
      throw this.claims.reject(IdempotencyProblemException.scopeInvalid(), routeLabelOf(request));
    }
  }

  private fingerprintOf(
    request: any,
    route: ResolvedIdempotencyRouteOptions,
    scope: string,
  ): string {
    try {
      return fingerprintOf(request, route, scope);
    } catch (error) {
      if (!(error instanceof IdempotencyProblemException)) throw error;
      if (error.code === 'idempotency_body_unreadable') {
        this.unparsedTypes.warn(request.headers['content-type'], routeLabelOf(request));
      }
      throw this.claims.reject(error, routeLabelOf(request), scope);
    }
  }
}
