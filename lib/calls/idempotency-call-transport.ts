import type { ExecutionContext } from '@nestjs/common';
import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyCallInput } from '../execution/idempotency-runner';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type { IdempotencyNamespace } from '../utils/request-scope';

/**
 * One call of a handler that is not an HTTP route (a message, an event, a GraphQL mutation), as
 * the runner reads a request, less what the adapter derives (its label and fingerprint).
 */
export interface IdempotentCall extends Omit<
  IdempotencyCallInput,
  'label' | 'fingerprint' | 'namespace'
> {
  /** What a retry under the same key must match: the call's data, as canonical JSON. */
  payload: unknown;
  /** The namespace its record is kept in, apart from every HTTP route's (`normaliseScope`). */
  namespace: IdempotencyNamespace;
}

/**
 * How a kind of call that is not an HTTP request reaches the run: the port through which an
 * entry point (`nest-idempotency/microservices`, `nest-idempotency/graphql`) gives its handlers
 * the claim, lease, transaction and replay of `@Idempotent()` routes. The core reads the call
 * and answers it through the transport its decorator set; it knows no broker and no schema.
 * @internal
 */
export interface IdempotencyCallTransport {
  /**
   * Reads one call from its context, after the handler's guards ran.
   * @param context - the call's execution context (`rpc`, `graphql`)
   * @param route - the handler's options
   */
  read(context: ExecutionContext, route: ResolvedIdempotencyRouteOptions): IdempotentCall;
  /**
   * The library's refusal (a key missing, in use or reused; the store down) as the error this
   * transport's caller understands; it is thrown to the caller as the handler's error.
   * @param problem - the refusal
   * @param context - the call's execution context
   * @param handlerRan - whether the handler ran before the refusal (its transactional
   *   completion could not commit): then the handler settled its delivery itself
   */
  refuse(
    problem: IdempotencyProblemException,
    context: ExecutionContext,
    handlerRan: boolean,
  ): unknown;
  /**
   * Called when a call is answered from its record without running the handler (a
   * redelivery), before the answer is returned: for a transport that must settle the delivery
   * itself (acknowledge a message the handler would have acknowledged).
   * @param context - the call's execution context
   */
  replayed?(context: ExecutionContext): void;
  /**
   * The value a replay returns, from the stored JSON: for a transport whose caller needs it in
   * another form than JSON gives back (a GraphQL `DateTime` field wants a `Date`). Without it,
   * the stored JSON is returned as parsed.
   * @param stored - the handler's first value, as JSON brings it back
   * @param context - the call's execution context
   */
  revive?(stored: unknown, context: ExecutionContext): unknown;
}

/** Metadata key of a handler's call transport. */
const CALL_TRANSPORT_METADATA = 'nest-idempotency:call-transport';

/**
 * The decorator of a kind of call: `@Idempotent()`'s, then the call transport set on the
 * function Nest calls (`descriptor.value` once `@Idempotent()` has wrapped it).
 * @param idempotent - `Idempotent(route)` for the handler's route options
 * @param transport - how its calls are read and answered
 * @internal
 */
export function idempotentCall(
  idempotent: MethodDecorator,
  transport: IdempotencyCallTransport,
): MethodDecorator {
  return (target, propertyKey, descriptor) => {
    idempotent(target, propertyKey, descriptor);
    Reflect.defineMetadata(CALL_TRANSPORT_METADATA, transport, descriptor.value as object);
    return descriptor;
  };
}

/**
 * The call transport a decorator set on a handler, if any.
 * @param handler - `ExecutionContext.getHandler()`
 * @internal
 */
export function callTransportOf(handler: object): IdempotencyCallTransport | undefined {
  return Reflect.getMetadata(CALL_TRANSPORT_METADATA, handler);
}
