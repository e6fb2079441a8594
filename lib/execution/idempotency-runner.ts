import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { Observable } from 'rxjs';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../config/idempotency.defaults';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyKeyPlace } from '../errors/idempotency-problem.types';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type {
  ClaimResult,
  KnownClaimResult,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import { IdempotencyMetrics } from '../metrics/idempotency-metrics';
import { IdempotencyStore } from '../storage/idempotency.store';
import type {
  IdempotencyStoreCapabilities,
  IdempotencyStoreMemory,
} from '../storage/idempotency-store.capabilities';
import { normaliseScope } from '../utils/request-scope';
import type { IdempotencyNamespace } from '../utils/request-scope';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';
import { IdempotencyWaiters } from '../waiting/idempotency-waiters';
import { claimOrWait } from './wait-for-claim';
import type { WaitingRequest } from './wait-for-claim';
import type { WonClaim } from './idempotency-execution.factory';
import type { IdempotencyExecution } from './idempotency-execution';
import { emitRejected } from './rejected-event';
import { omittedBodyOf } from './stored-response';
import { storeUnavailable } from './store-unavailable';
import { rejectOnThrow } from '../utils/reject-on-throw';

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

/** A completed record to replay. */
export interface Replay {
  kind: 'replay';
  scope: string;
  key: string;
  response: StoredResponse;
  label: string;
}

/** What a claim comes to: the handler is to run, or a completed record is to be replayed. */
export type Claimed = { kind: 'run'; execution: IdempotencyExecution } | Replay;

/** A call whose key, scope and fingerprint were checked: what its claim is decided by. */
interface CheckedCall extends Pick<IdempotencyCallInput, 'keyPlace' | 'method' | 'path' | 'label'> {
  route: ResolvedIdempotencyRouteOptions;
  scope: string;
  key: string;
  fingerprint: string;
}

/**
 * Runs an idempotent handler for any transport: checks the key, scopes and fingerprints the
 * call, claims its key in the store, then replays the stored answer, refuses (in flight,
 * reused, abandoned, store down), or runs the handler once through an `IdempotencyExecution`,
 * which owns the rest of the call's life. Every transport goes through it, so that an HTTP
 * request and a message meet the same rules.
 * @internal
 */
@Injectable()
export class IdempotencyRunner {
  private readonly logger = new Logger('Idempotency');
  private readonly memory?: IdempotencyStoreMemory;

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly metrics: IdempotencyMetrics,
    private readonly waiters: IdempotencyWaiters,
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES) capabilities: IdempotencyStoreCapabilities,
  ) {
    this.memory = capabilities.memory;
  }

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
    let checked: CheckedCall;
    try {
      const call = transport.read(context, route);
      // No key on a `required: false` route: unprotected.
      if (call.key.kind === 'missing' && !route.required) return next.handle();
      checked = this.checked(route, call);
      // A replay from memory, or a refusal this instance can tell alone (thrown): no promise.
      const replay = this.known(checked);
      if (replay) return this.replay(context, replay, transport);
    } catch (error) {
      throw this.refusal(error, context, transport);
    }
    // One observable around the claim and what follows it. A claim may settle after the caller
    // stopped listening (an outer timeout answered first).
    return new Observable((subscriber) => {
      this.claim(context, checked, transport).then(
        (claimed) => {
          // A key won for a handler that will never run is given back at once rather than held
          // by its lease; a replay has nothing left to do.
          if (subscriber.closed) {
            if (claimed.kind === 'run') void claimed.execution.abort();
            return;
          }
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
  private checked(route: ResolvedIdempotencyRouteOptions, call: IdempotencyCallInput): CheckedCall {
    const { key, keyPlace, label, method, path } = call;
    if (key.kind === 'missing') {
      throw this.reject(IdempotencyProblemException.keyMissing(keyPlace), label);
    }
    if (key.kind === 'invalid') {
      throw this.reject(IdempotencyProblemException.keyInvalid(keyPlace, key.reason), label);
    }
    const scope = this.scopeOf(route, call);
    try {
      const fingerprint = call.fingerprint(scope);
      return { route, keyPlace, scope, key: key.key, fingerprint, label, method, path };
    } catch (error) {
      if (!(error instanceof IdempotencyProblemException)) throw error;
      throw this.reject(error, label, scope);
    }
  }

  /**
   * What this instance already knows of the key, answered at once, without a promise: the
   * replay of a completed record it holds, or the refusal (thrown) of a key it runs now, as
   * `claim()` would answer. Replays and same-key storms on one instance take this path.
   * @returns `undefined` when only the store can tell (then `claim()`), or when the key is in
   *   flight on a route that may wait
   * @throws IdempotencyProblemException the refusal its client gets
   */
  private known(input: CheckedCall): Replay | undefined {
    if (!this.memory) return undefined;
    const started = performance.now();
    const answer = this.memory.answer(input.scope, input.key, input.fingerprint);
    if (!answer || (answer.outcome === 'in_flight' && input.route.wait.maxSeconds > 0)) {
      return undefined;
    }
    this.metrics.claimed(input.label, (performance.now() - started) / 1000, answer.outcome);
    return this.decided(answer, input);
  }

  /**
   * Claims the key of one call (waiting for a key in flight on a route that may wait).
   * Written with `then()` rather than as an async function: one promise per step saved on every
   * first execution.
   * @throws IdempotencyProblemException the refusal its client gets
   */
  private claim(
    context: ExecutionContext,
    input: CheckedCall,
    transport: IdempotencyTransport,
  ): Promise<Claimed> {
    return rejectOnThrow(() => {
      const { route, scope, key, label, fingerprint, method, path } = input;
      const ownerToken = randomUUID();
      const { lockTimeoutSeconds, ttlSeconds } = route;
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
      let claimedAt = 0;
      let started = 0;
      const send = (): Promise<ClaimResult> => {
        claimedAt = Date.now();
        started = performance.now();
        // A store that throws rather than rejects is unavailable all the same (503).
        return rejectOnThrow(() => this.store.claim(claimRequest));
      };
      const measured = (claim: ClaimResult) => {
        this.metrics.claimed(label, (performance.now() - started) / 1000, claim.outcome);
        return claim;
      };
      const failed = (error: unknown): never => {
        this.metrics.claimed(label, (performance.now() - started) / 1000, 'error');
        // A record the store found but cannot read (sealed with a key that is gone): its own 500.
        if (error instanceof IdempotencyProblemException) {
          throw this.reject(error, label, scope, key);
        }
        throw this.storeUnavailable(error, route, 'claim', label);
      };
      const follow = (claim: ClaimResult): Claimed | Promise<Claimed> => {
        if (claim.outcome !== 'claimed') return this.decided(claim, input);
        const { recordId, attempt } = claim;
        const won = { scope, key, ownerToken, recordId, attempt, claimedAt, label };
        const execution = transport.start(context, route, won);
        if (!(execution instanceof Promise)) return { kind: 'run', execution };
        return execution.then(
          (begun) => ({ kind: 'run', execution: begun }),
          (error: unknown) => Promise.reject(this.storeUnavailable(error, route, 'begin', label)),
        );
      };
      // On a route that may wait, a duplicate that finds the key in flight waits for the first
      // request, then claims again.
      if (route.wait.maxSeconds > 0 && transport.waiting) {
        const claimOnce = () => send().then(measured, failed);
        const waiting = transport.waiting(context, scope, key, label);
        return claimOrWait(this.waiters, this.events, route.wait, waiting, claimOnce).then(follow);
      }
      return send().then((claim) => follow(measured(claim)), failed);
    });
  }

  /** What an answer other than a key won means for the call: a replay, or a refusal (thrown). */
  private decided(claim: KnownClaimResult, input: CheckedCall): Replay {
    const { route, scope, key, label, keyPlace } = input;
    const refuse = (problem: IdempotencyProblemException) =>
      this.reject(problem, label, scope, key);
    switch (claim.outcome) {
      case 'mismatch':
        throw refuse(IdempotencyProblemException.keyReused(keyPlace));
      case 'in_flight':
        throw refuse(IdempotencyProblemException.keyInUse(keyPlace, route.retryAfterSeconds));
      case 'abandoned':
        throw refuse(IdempotencyProblemException.operationAbandoned());
      case 'completed': {
        const omitted = omittedBodyOf(claim.response);
        if (omitted) {
          throw refuse(
            IdempotencyProblemException.responseNotStored(keyPlace, claim.response, omitted),
          );
        }
        return { kind: 'replay', scope, key, response: claim.response, label };
      }
    }
  }

  /** The store could not be reached: nothing runs, the client is told to retry (503). */
  private storeUnavailable(
    error: unknown,
    route: ResolvedIdempotencyRouteOptions,
    operation: string,
    label: string,
  ): IdempotencyProblemException {
    const failure = { operation, error, route: label };
    const problem = storeUnavailable(this.events, failure, route.retryAfterSeconds);
    this.logger.error(`Idempotency store unavailable during ${operation}`, error as Error);
    return this.reject(problem, label);
  }

  /** Emits the `rejected` event of a refusal, and returns it to be thrown. */
  private reject(
    error: IdempotencyProblemException,
    label: string,
    scope?: string,
    key?: string,
  ): IdempotencyProblemException {
    return emitRejected(this.events, error, { route: label, scope, key });
  }

  /** Writes the stored answer back through the transport, and says so. */
  private replay(
    context: ExecutionContext,
    replay: Replay,
    transport: IdempotencyTransport,
  ): Observable<unknown> {
    const answer = transport.replay(context, replay);
    const { scope, key, response, label: route } = replay;
    this.events.emit({ type: 'replayed', scope, key, status: response.status, route });
    return answer;
  }

  private scopeOf(route: ResolvedIdempotencyRouteOptions, call: IdempotencyCallInput): string {
    const value = route.scope(call.scopeSource);
    // A resolver the application set that finds no caller: refused rather than shared. Only
    // the default (`req.user?.id`) shares '' among callers, and says so at bootstrap.
    if ((value ?? '') === '' && route.scope !== DEFAULT_IDEMPOTENCY_OPTIONS.request.scope) {
      throw this.reject(IdempotencyProblemException.scopeMissing(), call.label);
    }
    try {
      return normaliseScope(value, call.namespace);
    } catch (error) {
      if (!(error instanceof IdempotencyConfigurationError)) throw error;
      this.logger.error(error.message);
      throw this.reject(IdempotencyProblemException.scopeInvalid(), call.label);
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
