import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyKeyPlace } from '../errors/idempotency-problem.types';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type {
  ClaimResult,
  KnownClaimResult,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import { IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import { IdempotencyMetrics } from '../metrics/idempotency-metrics';
import { IdempotencyStore } from '../storage/idempotency.store';
import type {
  IdempotencyStoreCapabilities,
  IdempotencyStoreMemory,
} from '../storage/idempotency-store.capabilities';
import { IdempotencyWaiters } from '../waiting/idempotency-waiters';
import { claimOrWait } from './wait-for-claim';
import type { WaitingRequest } from './wait-for-claim';
import type { WonClaim } from './idempotency-execution.factory';
import type { IdempotencyExecution } from './idempotency-execution';
import { emitRejected } from './rejected-event';
import { omittedBodyOf } from './stored-response';

/** One request or call about to claim its key, as its transport (HTTP, a message) reads it. */
export interface ClaimInput {
  /** Options in force for the route. */
  route: ResolvedIdempotencyRouteOptions;
  /** Where the key is, as refusals name it (the key header, a message's field). */
  keyPlace: IdempotencyKeyPlace;
  /** Caller identity the key belongs to. */
  scope: string;
  /** The idempotency key. */
  key: string;
  /** What a retry must match (`fingerprintRequest`). */
  fingerprint: string;
  /** Kept with the record: the method, or the kind of call. */
  method: string;
  /** Kept with the record: the path, or what the call names (a pattern). */
  path: string;
  /** The route, as `METHOD /pattern`, for events and metrics. */
  label: string;
  /** The request waiting for a key in flight, on a route that may wait. */
  waiting?: () => WaitingRequest;
  /**
   * Starts the execution of a claim this request won: at once, or once what it opens first (a
   * transaction) is open.
   */
  start(claim: WonClaim): IdempotencyExecution | Promise<IdempotencyExecution>;
}

/** What `IdempotencyClaims.known()` needs: the key and what names it, before anything is sent. */
export type KnownClaimInput = Pick<
  ClaimInput,
  'route' | 'keyPlace' | 'scope' | 'key' | 'fingerprint' | 'label'
>;

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

/**
 * Claims a key in the store and says what follows: run the handler (the key was won), replay the
 * completed record, or refuse (in flight, reused, abandoned, store down). Shared by every
 * transport, so that an HTTP request and a message meet the same rules.
 */
@Injectable()
export class IdempotencyClaims {
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
   * What this instance already knows of the key, answered at once, without a promise: the
   * replay of a completed record it holds, or the refusal (thrown) of a key it runs now, as
   * `claim()` would answer. Replays and same-key storms on one instance take this path.
   * @returns `undefined` when only the store can tell (then `claim()`), or when the key is in
   *   flight on a route that may wait
   * @throws IdempotencyProblemException the refusal its client gets
   */
  known(input: KnownClaimInput): Replay | undefined {
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
   * Claims the key of one request (waiting for a key in flight on a route that may wait).
   * Written with `then()` rather than as an async function: one promise per step saved on every
   * first execution.
   * @throws IdempotencyProblemException the refusal its client gets
   */
  claim(input: ClaimInput): Promise<Claimed> {
    try {
      const { route, scope, key, label } = input;
      const claimRequest = {
        scope,
        key,
        fingerprint: input.fingerprint,
        method: input.method,
        path: input.path,
        ownerToken: randomUUID(),
        lockTimeoutSeconds: route.lockTimeoutSeconds,
        ttlSeconds: route.ttlSeconds,
      };
      let claimedAt = 0;
      let started = 0;
      const send = (): Promise<ClaimResult> => {
        claimedAt = Date.now();
        started = performance.now();
        try {
          return this.store.claim(claimRequest);
        } catch (error) {
          // A store that throws rather than rejects is unavailable all the same (503).
          return Promise.reject(error);
        }
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
        const { ownerToken } = claimRequest;
        const execution = input.start({
          scope,
          key,
          ownerToken,
          recordId,
          attempt,
          claimedAt,
          label,
        });
        if (!(execution instanceof Promise)) return { kind: 'run', execution };
        return execution.then(
          (begun) => ({ kind: 'run', execution: begun }),
          (error: unknown) => Promise.reject(this.storeUnavailable(error, route, 'begin', label)),
        );
      };
      // On a route that may wait, a duplicate that finds the key in flight waits for the first
      // request, then claims again.
      if (route.wait.maxSeconds > 0 && input.waiting) {
        const claimOnce = () => send().then(measured, failed);
        return claimOrWait(this.waiters, this.events, route.wait, input.waiting(), claimOnce).then(
          follow,
        );
      }
      return send().then((claim) => follow(measured(claim)), failed);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** What an answer other than a key won means for the request: a replay, or a refusal (thrown). */
  private decided(claim: KnownClaimResult, input: KnownClaimInput): Replay {
    const { route, scope, key, label, keyPlace } = input;
    switch (claim.outcome) {
      case 'mismatch':
        throw this.reject(IdempotencyProblemException.keyReused(keyPlace), label, scope, key);
      case 'in_flight':
        throw this.reject(
          IdempotencyProblemException.keyInUse(keyPlace, route.retryAfterSeconds),
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
            IdempotencyProblemException.responseNotStored(keyPlace, claim.response, omitted),
            label,
            scope,
            key,
          );
        }
        return { kind: 'replay', scope, key, response: claim.response, label };
      }
    }
  }

  /** The store could not be reached: nothing runs, the client is told to retry (503). */
  storeUnavailable(
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

  /** Emits the `rejected` event of a refusal, and returns it to be thrown. */
  reject(
    error: IdempotencyProblemException,
    label: string,
    scope?: string,
    key?: string,
  ): IdempotencyProblemException {
    return emitRejected(this.events, error, { route: label, scope, key });
  }
}
