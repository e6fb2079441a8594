import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { isHandlerStartMarked } from '../decorators/handler-start';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { IdempotencyEvent } from '../events/idempotency.events';
import { ResponseAdapterResolver } from '../http/response-adapter.resolver';
import type { ResponseSnapshot } from '../http/response-sink.interface';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import type {
  ResolvedIdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';
import { IdempotencyStore } from '../storage/idempotency.store';
import { IdempotencyExecution } from './idempotency-execution';
import { IdempotencyRun } from './idempotency-run';
import { IdempotencyMetrics } from '../metrics/idempotency-metrics';
import { rejectOnThrow } from '../utils/reject-on-throw';

/** What a call that is not an HTTP request has set before its handler runs: nothing. */
const CALL_BEFORE: ResponseSnapshot = { status: 200, headers: {} };

/** A key this request won in the store. */
export interface WonClaim {
  scope: string;
  key: string;
  ownerToken: string;
  recordId: string;
  attempt: number;
  /** `Date.now()` when the claim was sent: the lease is counted from there. */
  claimedAt: number;
  /** The route the request matched (`routeLabelOf`), carried by its events. */
  label: string;
}

/**
 * Builds the execution of each claimed request, with what it needs: the store, the events, the
 * response adapter of the application's HTTP adapter, and a once-per-route warning.
 */
@Injectable()
export class IdempotencyExecutionFactory {
  private readonly logger = new Logger('Idempotency');
  private readonly warned = new Set<string>();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly responses: ResponseAdapterResolver,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly metrics: IdempotencyMetrics,
  ) {}

  /**
   * Starts the execution of a claimed request: its run (lease renewed from the claim on), its
   * transaction, the response capture. Returned at once when there is nothing to open first
   * (a route that is not transactional): no promise on most first executions.
   * @throws when the store cannot open the transaction (the key is then given back)
   */
  start(
    context: ExecutionContext,
    route: ResolvedIdempotencyRouteOptions,
    claim: WonClaim,
  ): IdempotencyExecution | Promise<IdempotencyExecution> {
    // A throw is turned into the rejection its caller handles, here and in startCall().
    return rejectOnThrow(() => {
      const response = context.switchToHttp().getResponse();
      const adapter = this.responses.get();
      const before = adapter.snapshot(response);
      const begun = this.begin(context, route, claim, before, adapter.textContentType);
      const captured = (execution: IdempotencyExecution) => {
        adapter.capture(response, execution);
        return execution;
      };
      return begun instanceof Promise ? begun.then(captured) : captured(begun);
    });
  }

  /**
   * Starts the execution of a claimed call that is not an HTTP request (a message, a GraphQL
   * mutation): its run and its transaction. Its caller hands the handler's value to it.
   * @throws when the store cannot open the transaction (the key is then given back)
   */
  startCall(
    context: ExecutionContext,
    route: ResolvedIdempotencyRouteOptions,
    claim: WonClaim,
  ): IdempotencyExecution | Promise<IdempotencyExecution> {
    const textContentType = 'application/json; charset=utf-8';
    return rejectOnThrow(() => this.begin(context, route, claim, CALL_BEFORE, textContentType));
  }

  private begin(
    context: ExecutionContext,
    route: ResolvedIdempotencyRouteOptions,
    claim: WonClaim,
    before: ResponseSnapshot,
    textContentType: string,
  ): IdempotencyExecution | Promise<IdempotencyExecution> {
    const { scope, key, ownerToken, recordId, attempt, label } = claim;
    // This request's events carry its route (each event is a fresh literal: given its route
    // rather than copied).
    const events = {
      emit: (event: IdempotencyEvent) => {
        (event as { route?: string }).route = label;
        this.events.emit(event);
      },
    };
    const run = IdempotencyRun.begin({
      store: this.store,
      // A route that may wait tells waiters on other instances when the record settles.
      ref:
        route.wait.maxSeconds > 0
          ? { scope, key, ownerToken, announce: true }
          : { scope, key, ownerToken },
      identity: { scope, key, recordId, attempt },
      settings: route,
      completion: route.transactional ? 'transaction' : 'response',
      lockTimeoutSeconds: route.lockTimeoutSeconds,
      maxLockHoldSeconds: route.maxLockHoldSeconds,
      claimedAt: claim.claimedAt,
      onLost: () => {
        events.emit({ type: 'lock_lost', scope, key, during: 'renew' });
        this.logger.warn('Lost the lease of an idempotent request during renew');
      },
      onError: (error) => events.emit({ type: 'store_error', operation: 'renew', error }),
    });
    const execution = new IdempotencyExecution(run, route, {
      store: this.store,
      events,
      recordCompletion: (seconds, stored) => this.metrics.completed(label, seconds, stored),
      logger: this.logger,
      problemTypeBaseUri: this.options.problemTypeBaseUri,
      errorBody: this.options.errorBody,
      startMarked: isHandlerStartMarked(context.getHandler()),
      warnUnstorable: (why) => this.warnOnce(label, why),
      before,
      textContentType,
    });
    // Only a transactional route has something to open before its handler runs.
    if (!route.transactional) return execution;
    return execution.begin().then(
      () => execution,
      (error: unknown) => execution.abort().then(() => Promise.reject(error)),
    );
  }

  private warnOnce(route: string, why: string): void {
    if (this.warned.has(route)) return;
    this.warned.add(route);
    this.logger.warn(`${route}: response not stored because ${why}; the key was released`);
  }
}
