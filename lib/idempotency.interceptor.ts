import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { Observable, catchError, defer, from, mergeMap, of, tap, throwError } from 'rxjs';
import type { IdempotencyRequestState } from './context/idempotency-request-state';
import { idempotencyRequestStorage } from './context/idempotency-request-state';
import { IdempotencyProblemException } from './errors/idempotency-problem.exception';
import { IdempotencyEvents } from './events/idempotency.events';
import { IdempotencyExecution } from './idempotency-execution';
import { IdempotencyGuard, PARSED_KEY } from './idempotency.guard';
import { IDEMPOTENCY_OPTIONS } from './idempotency.tokens';
import { IDEMPOTENT_REPLAYED_HEADER } from './idempotency.constants';
import { IdempotencyRouteOptionsResolver } from './idempotency-route-options.resolver';
import type {
  IdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from './interfaces/idempotency-module-options.interface';
import type { StoredResponse } from './interfaces/idempotency-record.interface';
import { IdempotencyStore } from './storage/idempotency.store';
import { fingerprintRequest } from './utils/fingerprint';
import type { ParsedIdempotencyKey } from './utils/parse-idempotency-key';
import { InFlightClaims } from './utils/in-flight-claims';
import { ReplayCache } from './utils/replay-cache';
import { installSendHook } from './utils/response-send-hook';

const HANDLED = Symbol('nest-idempotency:handled');

/**
 * Claims, fingerprints, runs, stores and replays (SPEC §5–§7). Bound to routes by
 * `@Idempotent()`; runs after the guard and before pipes.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly warned = new Set<string>();

  constructor(
    private readonly routes: IdempotencyRouteOptionsResolver,
    private readonly guard: IdempotencyGuard,
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly replayCache: ReplayCache,
    private readonly inFlight: InFlightClaims,
  ) {}

  /** @inheritDoc */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const route = this.routes.resolve(context, request.method);
    if (!route || request[HANDLED]) return next.handle();
    request[HANDLED] = true;
    // The guard normally parsed the key already; parse here too when it did not run.
    if (!request[PARSED_KEY]) this.guard.canActivate(context);
    const parsed: ParsedIdempotencyKey = request[PARSED_KEY];
    if (parsed.kind !== 'valid') return next.handle();

    return defer(() => this.claim(request, route, parsed.key)).pipe(
      mergeMap((claim) => {
        const response = http.getResponse();
        if ('replay' in claim) return this.replay(response, claim.replay, claim.state);
        return this.execute(context, response, next, route, claim.execution);
      }),
    );
  }

  private async claim(
    request: any,
    route: IdempotencyRouteOptions,
    key: string,
  ): Promise<
    { replay: StoredResponse; state: IdempotencyRequestState } | { execution: IdempotencyExecution }
  > {
    const scope = route.scope(request) ?? '';
    const fingerprint = fingerprintRequest({
      scope,
      method: request.method,
      url: request.originalUrl ?? request.url,
      body: this.fingerprintableBody(request),
      rawBody: request.rawBody,
      contentType: request.headers['content-type'],
      headers: route.fingerprintHeaders.map((name) => {
        const value = request.headers[name];
        return [name, Array.isArray(value) ? value.join(', ') : value];
      }),
    });
    const local = await this.answerLocally(route, scope, key, fingerprint);
    if (local) return local;
    const endClaim = this.inFlight.begin(scope, key);
    const ownerToken = randomUUID();
    const claimedAt = this.replayCache.now();
    let result;
    try {
      result = await this.store.claim({
        scope,
        key,
        fingerprint,
        method: request.method,
        path: request.originalUrl ?? request.url,
        ownerToken,
        lockTimeoutSeconds: route.lockTimeoutSeconds,
        ttlSeconds: route.ttlSeconds,
      });
    } catch (error) {
      endClaim?.({ claimed: false });
      throw this.storeUnavailable(error, route, 'claim');
    }
    if (result.outcome === 'completed' && result.expiresInMs !== undefined) {
      this.replayCache.set(
        scope,
        key,
        { recordId: result.recordId, fingerprint, response: result.response },
        claimedAt + result.expiresInMs,
      );
    }
    // After the cache is filled: duplicates waiting on this claim look there first.
    endClaim?.(
      result.outcome === 'claimed'
        ? { claimed: true, fingerprint, ownerToken, lockTimeoutSeconds: route.lockTimeoutSeconds }
        : { claimed: false },
    );
    const state: IdempotencyRequestState = {
      scope,
      key,
      fingerprint,
      recordId: result.recordId,
      attempt: result.outcome === 'claimed' ? result.attempt : 0,
      handlerStarted: false,
    };
    switch (result.outcome) {
      case 'mismatch':
        throw this.keyReused(route, scope, key);
      case 'in_flight':
        throw this.keyInUse(route, scope, key);
      case 'completed':
        return { replay: result.response, state };
    }
    const execution = new IdempotencyExecution({ scope, key, ownerToken }, state, route, {
      store: this.store,
      events: this.events,
      logger: this.logger,
      problemTypeBaseUri: this.options.problemTypeBaseUri,
      replayCache: this.replayCache,
      inFlight: this.inFlight,
      warnUnstorable: (why) => this.warnOnce(request, why),
    });
    try {
      await execution.start();
    } catch (error) {
      await execution.settle(undefined).catch(() => undefined);
      throw this.storeUnavailable(error, route, 'begin');
    }
    return { execution };
  }

  /**
   * Answers from this instance's own knowledge when it is the store's answer too: a cached
   * completed record (replay, or 422 for another payload), or a key whose handler runs here
   * (409, or 422). A duplicate of a claim still on its way waits for it once, then looks again.
   */
  private async answerLocally(
    route: IdempotencyRouteOptions,
    scope: string,
    key: string,
    fingerprint: string,
  ): Promise<{ replay: StoredResponse; state: IdempotencyRequestState } | undefined> {
    for (let waited = false; ; waited = true) {
      const cached = this.replayCache.get(scope, key);
      if (cached) {
        // A completed record does not change until it expires: answer as the store would.
        if (cached.fingerprint !== fingerprint) throw this.keyReused(route, scope, key);
        const state: IdempotencyRequestState = {
          scope,
          key,
          fingerprint,
          recordId: cached.recordId,
          attempt: 0,
          handlerStarted: false,
        };
        return { replay: cached.response, state };
      }
      const local = this.inFlight.get(scope, key);
      if (local?.state === 'running') {
        if (local.fingerprint !== fingerprint) throw this.keyReused(route, scope, key);
        throw this.keyInUse(route, scope, key);
      }
      if (local?.state !== 'claiming' || waited) return undefined;
      await local.settled;
    }
  }

  /**
   * The body as the application parsed it. A body nobody parsed (no parser for its content type,
   * `rawBody` off) cannot be fingerprinted on its bytes: its type and length stand in for it,
   * and a warning says how to fix that.
   */
  private fingerprintableBody(request: any): unknown {
    const length = Number(request.headers['content-length'] ?? 0);
    // A chunked body has no length but is a body all the same: never fingerprint it as none.
    const chunked = request.headers['transfer-encoding'] !== undefined;
    if (request.body !== undefined || request.rawBody || !(length > 0 || chunked)) {
      return request.body;
    }
    this.warnOnce(
      request,
      'its body was not parsed, so only its content type and length are fingerprinted; ' +
        'start Nest with rawBody: true and add a parser for this content type ' +
        "(app.useBodyParser('text') or 'raw')",
      'body',
    );
    return `unparsed:${request.headers['content-type'] ?? ''}:${chunked ? 'chunked' : length}`;
  }

  private replay(
    response: any,
    stored: StoredResponse,
    state: IdempotencyRequestState,
  ): Observable<null> {
    installSendHook(response, {
      decide: async () => ({
        status: stored.status,
        headers: { ...stored.headers, [IDEMPOTENT_REPLAYED_HEADER]: 'true' },
        body: stored.body,
      }),
      bypassed: () => undefined,
    });
    this.events.emit({
      type: 'replayed',
      scope: state.scope,
      key: state.key,
      status: stored.status,
    });
    return of(null);
  }

  private execute(
    context: ExecutionContext,
    response: any,
    next: CallHandler,
    route: IdempotencyRouteOptions,
    execution: IdempotencyExecution,
  ): Observable<unknown> {
    installSendHook(response, {
      decide: (outgoing) => execution.settle(outgoing),
      bypassed: () => void execution.abandon(),
    });
    return new Observable((subscriber) =>
      idempotencyRequestStorage.run(execution.state, () =>
        next
          .handle()
          .pipe(
            tap({
              next: () => (execution.handlerReturned = true),
              complete: () => (execution.handlerReturned = true),
            }),
            catchError((error) =>
              from(execution.onHandlerError()).pipe(mergeMap(() => throwError(() => error))),
            ),
          )
          .subscribe(subscriber),
      ),
    );
  }

  private storeUnavailable(
    error: unknown,
    route: IdempotencyRouteOptions,
    operation: string,
  ): IdempotencyProblemException {
    this.events.emit({ type: 'store_error', operation, error });
    this.logger.error(`Idempotency store unavailable during ${operation}`, error as Error);
    return this.reject(
      new IdempotencyProblemException(
        'idempotency_store_unavailable',
        'The request was not processed because its idempotency record could not be written. Retry with the same key.',
        route.retryAfterSeconds,
      ),
    );
  }

  private keyInUse(
    route: IdempotencyRouteOptions,
    scope: string,
    key: string,
  ): IdempotencyProblemException {
    return this.reject(
      new IdempotencyProblemException(
        'idempotency_key_in_use',
        `A request with this ${route.header} is still being processed. Retry after it finishes.`,
        route.retryAfterSeconds,
      ),
      scope,
      key,
    );
  }

  private keyReused(
    route: IdempotencyRouteOptions,
    scope: string,
    key: string,
  ): IdempotencyProblemException {
    return this.reject(
      new IdempotencyProblemException(
        'idempotency_key_reused',
        `This ${route.header} was already used with a different request. Use a new key for a new request.`,
      ),
      scope,
      key,
    );
  }

  private reject(
    error: IdempotencyProblemException,
    scope?: string,
    key?: string,
  ): IdempotencyProblemException {
    this.events.emit({ type: 'rejected', scope, key, code: error.code, status: error.getStatus() });
    return error;
  }

  private warnOnce(request: any, why: string, topic: 'storage' | 'body' = 'storage'): void {
    const route = `${request.method} ${request.routeOptions?.url ?? request.route?.path ?? request.url}`;
    if (this.warned.has(`${topic} ${route}`)) return;
    this.warned.add(`${topic} ${route}`);
    this.logger.warn(
      topic === 'body'
        ? `${route}: ${why}`
        : `${route}: response not stored because ${why}; the key was released`,
    );
  }
}
