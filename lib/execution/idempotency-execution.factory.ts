import { Inject, Injectable, Logger } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyRequestState } from '../context/idempotency-request-state';
import { isHandlerStartMarked } from '../decorators/handler-start';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { IdempotencyEvent } from '../events/idempotency.events';
import { ResponseAdapterResolver } from '../http/response-adapter.resolver';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.tokens';
import type {
  IdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';
import { IdempotencyStore } from '../storage/idempotency.store';
import { IdempotencyExecution } from './idempotency-execution';
import { IdempotencyMetrics } from '../metrics/idempotency-metrics';

/** A key this request won in the store. */
export interface WonClaim {
  scope: string;
  key: string;
  fingerprint: string;
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
   * Starts the execution of a claimed request: lease heartbeat, transaction, response capture.
   * @throws when the store cannot open the transaction (the key is then given back)
   */
  async start(
    context: ExecutionContext,
    route: IdempotencyRouteOptions,
    claim: WonClaim,
  ): Promise<IdempotencyExecution> {
    const http = context.switchToHttp();
    const request = http.getRequest();
    const response = http.getResponse();
    const adapter = this.responses.get();
    const { scope, key, fingerprint, ownerToken, recordId, attempt } = claim;
    const state: IdempotencyRequestState = {
      scope,
      key,
      fingerprint,
      recordId,
      attempt,
      handlerStarted: false,
    };
    const { label } = claim;
    const execution = new IdempotencyExecution({ scope, key, ownerToken }, state, route, {
      store: this.store,
      // This request's events carry its route.
      events: { emit: (event) => this.events.emit({ ...event, route: label } as IdempotencyEvent) },
      recordCompletion: (seconds, stored) => this.metrics.completed(label, seconds, stored),
      logger: this.logger,
      problemTypeBaseUri: this.options.problemTypeBaseUri,
      errorBody: this.options.errorBody,
      warnUnstorable: (why) => this.warnOnce(request, why),
      before: adapter.snapshot(response),
      textContentType: adapter.textContentType,
      startMarked: isHandlerStartMarked(context.getHandler()),
    });
    try {
      await execution.begin(claim.claimedAt);
    } catch (error) {
      await execution.abort();
      throw error;
    }
    adapter.capture(response, execution);
    return execution;
  }

  private warnOnce(request: any, why: string): void {
    const route = `${request.method} ${request.routeOptions?.url ?? request.route?.path ?? request.url}`;
    if (this.warned.has(route)) return;
    this.warned.add(route);
    this.logger.warn(`${route}: response not stored because ${why}; the key was released`);
  }
}
