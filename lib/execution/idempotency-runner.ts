import { Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { Observable } from 'rxjs';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../config/idempotency.defaults';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyKeyPlace } from '../errors/idempotency-problem.exception';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import { normaliseScope } from '../utils/request-scope';
import type { IdempotencyNamespace } from '../utils/request-scope';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';
import type { WaitingRequest } from './wait-for-claim';
import { IdempotencyClaims } from './idempotency-claims';
import type { Claimed, KnownClaimInput, Replay } from './idempotency-claims';
import type { WonClaim } from './idempotency-execution.factory';
import type { IdempotencyExecution } from './idempotency-execution';

/** One request or call as its transport reads it: what its claim is decided by. */
export interface IdempotencyCallInput {
  /** The key, as the transport carries it. */
  key: ParsedIdempotencyKey;
  /** Where the key is, as refusals name it (a key header, a message's field). */
  keyPlace: IdempotencyKeyPlace;
  /** Kept with the record: the method, or the kind of call (`MESSAGE`, `MUTATION`). */
  method: string;
  /** Kept with the record: the path, or what the call names (a pattern, a field). */
  path: string;
  /** The route, as `METHOD /pattern`, for events and metrics. */
  label: string;
  /** What the route's `scope` function is given. */
  scopeSource: unknown;
  /** The namespace its record is kept in, apart from every HTTP route's (`normaliseScope`). */
  namespace?: IdempotencyNamespace;
  /**
   * What a retry under the same key must match, for the call's scope.
   * @throws IdempotencyProblemException when the call cannot be fingerprinted (too large)
   */
  fingerprint(scope: string): string;
}

/**
 * The port every transport (HTTP routes, messages, GraphQL mutations) adapts to: where the key,
 * the scope and the fingerprint's input come from, how the handler's answer is captured and a
 * stored one written back, and how a refusal is rendered. The runner holds every rule.
 */
export interface IdempotencyTransport {
  /** Reads the call from its context, after the handler's guards ran. */
  read(context: ExecutionContext, route: ResolvedIdempotencyRouteOptions): IdempotencyCallInput;
  /** Starts the execution of a claim the call won (its response capture, its transaction). */
  start(
    context: ExecutionContext,
    route: ResolvedIdempotencyRouteOptions,
    won: WonClaim,
  ): IdempotencyExecution | Promise<IdempotencyExecution>;
  /** The request waiting for a key in flight, for a transport whose callers may wait. */
  waiting?(context: ExecutionContext, scope: string, key: string, label: string): WaitingRequest;
  /** Runs the handler once through its execution, and answers with what it decided. */
  run(
    execution: IdempotencyExecution,
    next: CallHandler,
    context: ExecutionContext,
  ): Observable<unknown>;
  /** Writes the stored answer back to the caller, without running the handler. */
  replay(context: ExecutionContext, replay: Replay): Observable<unknown>;
  /** A refusal as the error this transport's caller gets, before the handler ran. */
  refuse(problem: IdempotencyProblemException, context: ExecutionContext): unknown;
}

/**
 * Runs an idempotent handler for any transport: checks the key, scopes and fingerprints the
 * call, claims its key, then replays the stored answer or runs the handler once through an
 * `IdempotencyExecution`, which owns the rest of the call's life.
 * @internal
 */
@Injectable()
export class IdempotencyRunner {
  private readonly logger = new Logger('Idempotency');

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly claims: IdempotencyClaims,
    private readonly events: IdempotencyEvents,
  ) {}

  /**
   * Claims the call's key, then replays its record or runs the handler once.
   * @param context - the call's execution context
   * @param next - the handler
   * @param route - options in force for the route
   * @param transport - how the call is read and answered
   */
  run(
    context: ExecutionContext,
    next: CallHandler,
    route: ResolvedIdempotencyRouteOptions,
    transport: IdempotencyTransport,
  ): Observable<unknown> {
    let known: KnownClaimInput;
    let call: IdempotencyCallInput;
    try {
      call = transport.read(context, route);
      // No key on a `required: false` route: unprotected.
      if (call.key.kind === 'missing' && !route.required) return next.handle();
      known = this.known(route, call);
      // A replay from memory, or a refusal this instance can tell alone (thrown): no promise.
      const replay = this.claims.known(known);
      if (replay) return this.replay(context, replay, transport);
    } catch (error) {
      throw this.refusal(error, context, transport);
    }
    // One observable around the claim and what follows it. A claim that settles after the
    // caller stopped listening (an outer timeout answered first) is given back: see unclaimed().
    return new Observable((subscriber) => {
      this.claim(context, known, call, transport).then(
        (claimed) => {
          if (subscriber.closed) return void this.unclaimed(claimed);
          try {
            const answer =
              claimed.kind === 'run'
                ? transport.run(claimed.execution, next, context)
                : this.replay(context, claimed, transport);
            answer.subscribe(subscriber);
          } catch (error) {
            // A replay that cannot be written (a stored header Node refuses) goes to Nest's
            // error handling, as a throw inside an operator would.
            subscriber.error(error);
          }
        },
        (error: unknown) => subscriber.error(this.refusal(error, context, transport)),
      );
    });
  }

  /** The call's key, scope and fingerprint, checked: what its claim is decided by. */
  private known(
    route: ResolvedIdempotencyRouteOptions,
    call: IdempotencyCallInput,
  ): KnownClaimInput {
    const { key, keyPlace, label } = call;
    if (key.kind === 'missing') {
      throw this.claims.reject(IdempotencyProblemException.keyMissing(keyPlace), label);
    }
    if (key.kind === 'invalid') {
      throw this.claims.reject(IdempotencyProblemException.keyInvalid(keyPlace, key.reason), label);
    }
    const scope = this.scopeOf(route, call);
    let fingerprint: string;
    try {
      fingerprint = call.fingerprint(scope);
    } catch (error) {
      if (!(error instanceof IdempotencyProblemException)) throw error;
      throw this.claims.reject(error, label, scope);
    }
    return { route, keyPlace, scope, key: key.key, fingerprint, label };
  }

  private claim(
    context: ExecutionContext,
    known: KnownClaimInput,
    call: IdempotencyCallInput,
    transport: IdempotencyTransport,
  ): Promise<Claimed> {
    const { route, keyPlace, scope, key, fingerprint, label } = known;
    // Each field named rather than spread from `known`: this runs on every first execution.
    return this.claims.claim({
      route,
      keyPlace,
      scope,
      key,
      fingerprint,
      label,
      method: call.method,
      path: call.path,
      waiting: transport.waiting && (() => transport.waiting!(context, scope, key, label)),
      start: (won) => transport.start(context, route, won),
    });
  }

  /**
   * The caller stopped listening before the claim settled (an outer timeout answered first):
   * a key won for a handler that will never run is given back at once rather than held by its
   * lease; a replay has nothing left to do.
   */
  private unclaimed(claimed: Claimed): void {
    if (claimed.kind === 'run') void claimed.execution.abort();
  }

  /** Writes the stored answer back through the transport, and says so. */
  private replay(
    context: ExecutionContext,
    replay: Replay,
    transport: IdempotencyTransport,
  ): Observable<unknown> {
    const answer = transport.replay(context, replay);
    const { scope, key, response, label } = replay;
    this.events.emit({ type: 'replayed', scope, key, status: response.status, route: label });
    return answer;
  }

  private scopeOf(route: ResolvedIdempotencyRouteOptions, call: IdempotencyCallInput): string {
    const value = route.scope(call.scopeSource);
    // A resolver the application set that finds no caller: refused rather than shared. Only
    // the default (`req.user?.id`) shares '' among callers, and says so at bootstrap.
    if (
      (value === undefined || value === null || value === '') &&
      route.scope !== DEFAULT_IDEMPOTENCY_OPTIONS.scope
    ) {
      throw this.claims.reject(IdempotencyProblemException.scopeMissing(), call.label);
    }
    try {
      return normaliseScope(value, call.namespace);
    } catch (error) {
      if (!(error instanceof IdempotencyConfigurationError)) throw error;
      this.logger.error(error.message);
      throw this.claims.reject(IdempotencyProblemException.scopeInvalid(), call.label);
    }
  }

  /** A refusal as its transport renders it; any other error as it is. */
  private refusal(
    error: unknown,
    context: ExecutionContext,
    transport: IdempotencyTransport,
  ): unknown {
    return error instanceof IdempotencyProblemException ? transport.refuse(error, context) : error;
  }
}
