import { randomUUID } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import { IdempotencyConfigurationError } from './errors/idempotency-configuration.error';
import { IdempotencyProblemException } from './errors/idempotency-problem.exception';
import { IdempotencyEvents } from './events/idempotency.events';
import { IdempotencyExecution } from './execution/idempotency-execution';
import { IdempotencyExecutionFactory } from './execution/idempotency-execution.factory';
import { IdempotencyMetrics } from './metrics/idempotency-metrics';
import { fingerprintOf } from './execution/request-fingerprint';
import { omittedBodyOf } from './execution/stored-response';
import { ResponseAdapterResolver } from './http/response-adapter.resolver';
import { keySourceOf } from './idempotency-key-source';
import type { IdempotencyKeySource } from './idempotency-key-source';
import { IdempotencyRouteOptionsResolver } from './idempotency-route-options.resolver';
import type { ResolvedIdempotencyRouteOptions } from './interfaces/idempotency-module-options.interface';
import type { StoredResponse } from './interfaces/idempotency-record.interface';
import { IdempotencyStore } from './storage/idempotency.store';
import { normaliseScope } from './utils/request-scope';
import { routeLabelOf } from './utils/route-label';
import { UnparsedContentTypeWarnings } from './utils/unparsed-content-types';
import { IdempotencyWaiters } from './waiting/idempotency-waiters';
import { claimOrWait } from './waiting/wait-for-claim';
import type { WaitingRequest } from './waiting/wait-for-claim';

/** A completed record found by the claim. */
interface Replay {
  scope: string;
  key: string;
  response: StoredResponse;
  label: string;
}

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
    private readonly store: IdempotencyStore,
    private readonly executions: IdempotencyExecutionFactory,
    private readonly responses: ResponseAdapterResolver,
    private readonly events: IdempotencyEvents,
    private readonly metrics: IdempotencyMetrics,
    private readonly waiters: IdempotencyWaiters,
  ) {}

  /** @inheritDoc */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest();
    const route = this.routes.resolve(context, request.method);
    if (!route || this.handled.has(request)) return next.handle();
    this.handled.add(request);
    // The key header, or the key source a decorator gave the route (a webhook's event id).
    const source = keySourceOf(context.getHandler());
    const key = source.read(request, route);
    // No key on a `required: false` route: unprotected. (The guard refused every other case.)
    if (key.kind !== 'valid') return next.handle();
    // One observable around the claim and what follows it (not defer + mergeMap: two fewer
    // subscriber layers on every request). A claim that settles after the caller stopped
    // listening (an outer timeout answered first) is given back: see unclaimed().
    return new Observable((subscriber) => {
      this.claim(context, route, key.key, source).then(
        (claimed) => {
          if (subscriber.closed) return void this.unclaimed(claimed);
          try {
            const answer =
              claimed instanceof IdempotencyExecution
                ? claimed.handle(next)
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

  private async claim(
    context: ExecutionContext,
    route: ResolvedIdempotencyRouteOptions,
    key: string,
    source: IdempotencyKeySource,
  ): Promise<IdempotencyExecution | Replay> {
    const request = context.switchToHttp().getRequest();
    const scope = this.scopeOf(request, route);
    const fingerprint =
      source.fingerprint?.(request, scope) ?? this.fingerprintOf(request, route, scope);
    const ownerToken = randomUUID();
    const path = request.originalUrl ?? request.url;
    const { method } = request;
    const { lockTimeoutSeconds, ttlSeconds } = route;
    const label = routeLabelOf(request);
    const claimRequest = {
      scope,
      key,
      fingerprint,
      method,
      path,
      ownerToken,
      lockTimeoutSeconds,
      ttlSeconds,
    };
    let claimedAt = Date.now();
    const claimOnce = async () => {
      claimedAt = Date.now();
      const started = performance.now();
      const claim = await this.store.claim(claimRequest).catch((error) => {
        this.metrics.claimed(label, (performance.now() - started) / 1000, 'error');
        // A record the store found but cannot read (sealed with a key that is gone): its own 500.
        if (error instanceof IdempotencyProblemException) {
          return Promise.reject(this.reject(error, label, scope, key));
        }
        return Promise.reject(this.storeUnavailable(error, route, 'claim', label));
      });
      this.metrics.claimed(label, (performance.now() - started) / 1000, claim.outcome);
      return claim;
    };
    // On a route that may wait, a duplicate that finds the key in flight waits for the first
    // request, then claims again.
    const claim =
      route.wait.maxSeconds > 0
        ? await claimOrWait(
            this.waiters,
            this.events,
            route.wait,
            this.waitingRequest(context, scope, key, label),
            claimOnce,
          )
        : await claimOnce();
    switch (claim.outcome) {
      case 'mismatch':
        throw this.reject(IdempotencyProblemException.keyReused(route.header), label, scope, key);
      case 'in_flight':
        throw this.reject(
          IdempotencyProblemException.keyInUse(route.header, route.retryAfterSeconds),
          label,
          scope,
          key,
        );
      case 'abandoned':
        throw this.reject(IdempotencyProblemException.operationAbandoned(), label, scope, key);
      case 'completed': {
        const omitted = omittedBodyOf(claim.response);
        if (omitted) {
          throw this.reject(
            IdempotencyProblemException.responseNotStored(route.header, claim.response, omitted),
            label,
            scope,
            key,
          );
        }
        return { scope, key, response: claim.response, label };
      }
    }
    const { recordId, attempt } = claim;
    return this.executions
      .start(context, route, {
        scope,
        key,
        ownerToken,
        recordId,
        attempt,
        claimedAt,
        label,
      })
      .catch((error) => Promise.reject(this.storeUnavailable(error, route, 'begin', label)));
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
  private unclaimed(claimed: IdempotencyExecution | Replay): void {
    if (claimed instanceof IdempotencyExecution) void claimed.abort();
  }

  /** Writes the stored response now, whatever the route's style. */
  private replay(context: ExecutionContext, replay: Replay): Observable<undefined> {
    this.responses.get().writeReplay(context.switchToHttp().getResponse(), replay.response);
    const { scope, key, response, label } = replay;
    this.events.emit({ type: 'replayed', scope, key, status: response.status, route: label });
    return of(undefined);
  }

  private scopeOf(request: any, route: ResolvedIdempotencyRouteOptions): string {
    try {
      return normaliseScope(route.scope(request));
    } catch (error) {
      if (!(error instanceof IdempotencyConfigurationError)) throw error;
      this.logger.error(error.message);
      throw this.reject(IdempotencyProblemException.scopeInvalid(), routeLabelOf(request));
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
      throw this.reject(error, routeLabelOf(request), scope);
    }
  }

  private storeUnavailable(
    error: unknown,
    route: ResolvedIdempotencyRouteOptions,
    operation: string,
    label: string,
  ): IdempotencyProblemException {
    this.events.emit({ type: 'store_error', operation, error, route: label });
    this.logger.error(`Idempotency store unavailable during ${operation}`, error as Error);
    return this.reject(
      IdempotencyProblemException.storeUnavailable(route.retryAfterSeconds),
      label,
    );
  }

  private reject(
    error: IdempotencyProblemException,
    label: string,
    scope?: string,
    key?: string,
  ): IdempotencyProblemException {
    const { code } = error;
    this.events.emit({
      type: 'rejected',
      scope,
      key,
      code,
      status: error.getStatus(),
      route: label,
    });
    return error;
  }
}
