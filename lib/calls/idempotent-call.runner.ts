import { Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { Observable } from 'rxjs';
import { IdempotencyConfigurationError } from '../errors/idempotency-configuration.error';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IdempotencyClaims } from '../execution/idempotency-claims';
import type { Claimed } from '../execution/idempotency-claims';
import { refusalOf } from '../execution/idempotency-execution';
import type { IdempotencyExecution } from '../execution/idempotency-execution';
import { IdempotencyExecutionFactory } from '../execution/idempotency-execution.factory';
import { IdempotencyRouteOptionsResolver } from '../idempotency-route-options.resolver';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { BodyTooLargeError, fingerprintRequest } from '../utils/fingerprint';
import { normaliseScope } from '../utils/request-scope';
import type { OutgoingResponse } from '../utils/response-bytes';
import { callTransportOf } from './idempotency-call-transport';
import type { IdempotencyCallTransport, IdempotentCall } from './idempotency-call-transport';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Runs an idempotent handler that is not an HTTP route (a message, a GraphQL mutation) through
 * the same claim, lease, transaction and replay, read and answered by the transport its
 * decorator set. The handler's last value is stored as JSON and returned to every later call
 * with the key; a handler that throws gives the key back, so the next delivery runs it.
 * @internal
 */
@Injectable()
export class IdempotentCallRunner {
  private readonly logger = new Logger('Idempotency');
  /**
   * Calls already handled, by their arguments (one array per call): a handler covered on its
   * class and on itself binds the interceptor twice, and the inner one must not claim again.
   */
  private readonly handled = new WeakSet<object>();

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly routes: IdempotencyRouteOptionsResolver,
    private readonly claims: IdempotencyClaims,
    private readonly executions: IdempotencyExecutionFactory,
    private readonly events: IdempotencyEvents,
  ) {}

  /**
   * Claims the call's key, then replays its record or runs the handler once.
   * @param context - a context whose type is not `http`
   * @param next - the handler
   * @throws IdempotencyConfigurationError when `@Idempotent()` covers it with no transport
   */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const route = this.routes.resolve(context, context.getType());
    const args = context.getArgs();
    if (!route || this.handled.has(args)) return next.handle();
    this.handled.add(args);
    const transport = callTransportOf(context.getHandler());
    if (!transport) {
      const handler = `${context.getClass().name}.${context.getHandler().name}`;
      throw IdempotencyConfigurationError.noCallTransport(context.getType(), handler);
    }
    const call = transport.read(context, route);
    if (call.key.kind === 'missing' && !route.required) return next.handle();
    return new Observable((subscriber) => {
      this.claim(context, route, call).then(
        (claimed) => {
          const answer =
            claimed.kind === 'run'
              ? this.run(claimed.execution, next, transport, context)
              : this.replay(claimed, transport, context);
          answer.subscribe(subscriber);
        },
        (error: unknown) =>
          subscriber.error(
            error instanceof IdempotencyProblemException
              ? transport.refuse(error, context, false)
              : error,
          ),
      );
    });
  }

  private async claim(
    context: ExecutionContext,
    route: ResolvedIdempotencyRouteOptions,
    call: IdempotentCall,
  ): Promise<Claimed> {
    const label = `${call.method} ${call.path}`;
    if (call.key.kind === 'missing') {
      throw this.claims.reject(IdempotencyProblemException.keyMissing(call.keyPlace), label);
    }
    if (call.key.kind === 'invalid') {
      throw this.claims.reject(
        IdempotencyProblemException.keyInvalid(call.keyPlace, call.key.reason),
        label,
      );
    }
    const { key } = call.key;
    const scope = this.scopeOf(route, call, label);
    return this.claims.claim({
      route,
      keyPlace: call.keyPlace,
      scope,
      key,
      fingerprint: this.fingerprintOf(route, call, scope, label),
      method: call.method,
      path: call.path,
      label,
      start: (won) => this.executions.startCall(context, route, won),
    });
  }

  /** Runs the handler once; stores its last value, or gives the key back when it throws. */
  private run(
    execution: IdempotencyExecution,
    next: CallHandler,
    transport: IdempotencyCallTransport,
    context: ExecutionContext,
  ): Observable<unknown> {
    return new Observable((subscriber) => {
      let last: unknown;
      execution.handle(next).subscribe({
        next: (value) => (last = value),
        error: (error) => void execution.giveBack().then(() => subscriber.error(error)),
        complete: () => {
          let outgoing: OutgoingResponse;
          try {
            outgoing = responseOf(last);
          } catch (error) {
            void execution.giveBack().then(() => subscriber.error(error));
            return;
          }
          void execution.onResponse(outgoing).then((decided) => {
            const refusal = decided && refusalOf(decided);
            if (refusal) return subscriber.error(transport.refuse(refusal, context, true));
            subscriber.next(last);
            subscriber.complete();
          });
        },
      });
    });
  }

  /** Answers from the record: the value the handler returned the first time. */
  private replay(
    replay: Extract<Claimed, { kind: 'replay' }>,
    transport: IdempotencyCallTransport,
    context: ExecutionContext,
  ): Observable<unknown> {
    return new Observable((subscriber) => {
      const { scope, key, response, label } = replay;
      transport.replayed?.(context);
      this.events.emit({ type: 'replayed', scope, key, status: response.status, route: label });
      const stored = valueOf(response);
      subscriber.next(transport.revive ? transport.revive(stored, context) : stored);
      subscriber.complete();
    });
  }

  private scopeOf(
    route: ResolvedIdempotencyRouteOptions,
    call: IdempotentCall,
    label: string,
  ): string {
    try {
      return normaliseScope(route.scope(call.scopeSource), call.namespace);
    } catch (error) {
      if (!(error instanceof IdempotencyConfigurationError)) throw error;
      this.logger.error(error.message);
      throw this.claims.reject(IdempotencyProblemException.scopeInvalid(), label);
    }
  }

  private fingerprintOf(
    route: ResolvedIdempotencyRouteOptions,
    call: IdempotentCall,
    scope: string,
    label: string,
  ): string {
    try {
      return fingerprintRequest({
        scope,
        method: call.method,
        url: call.path,
        body: call.payload,
        contentType: 'application/json',
        headers: [],
        maxBodyBytes: route.maxRequestBytes,
      });
    } catch (error) {
      if (!(error instanceof BodyTooLargeError)) throw error;
      throw this.claims.reject(
        IdempotencyProblemException.requestTooLarge(route.maxRequestBytes),
        label,
        scope,
      );
    }
  }
}

/** A handler's value as the response kept in its record: JSON, or no body for `undefined`. */
function responseOf(value: unknown): OutgoingResponse {
  const json = value === undefined ? undefined : JSON.stringify(value);
  return {
    status: 200,
    headers: json === undefined ? {} : { 'content-type': JSON_TYPE },
    body: json === undefined ? Buffer.alloc(0) : Buffer.from(json, 'utf8'),
  };
}

/** The value a record keeps: what the handler returned, as JSON brings it back. */
function valueOf(response: StoredResponse): unknown {
  return response.body.length === 0 ? undefined : JSON.parse(response.body.toString('utf8'));
}
