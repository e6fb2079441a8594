import type { Logger } from '@nestjs/common';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyErrorBodyRenderer } from '../errors/idempotency-problem.types';
import { renderProblem } from '../errors/render-problem';
import type { IdempotencyEvents } from '../events/idempotency.events';
import type { ResponseSnapshot } from '../http/response-sink.interface';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type {
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import { isCommitUnconfirmed } from '../storage/commit-unconfirmed.error';
import type { IdempotencyStore } from '../storage/idempotency.store';
import type { OutgoingResponse } from '../utils/response-bytes';
import type { ExecutionResult } from './execution-result';
import type { IdempotencyRun } from './idempotency-run';
import { emitRejected } from './rejected-event';

/** What an execution needs from its surroundings; built by `IdempotencyExecutionFactory`. */
export interface IdempotencyExecutionDeps {
  store: IdempotencyStore;
  events: Pick<IdempotencyEvents, 'emit'>;
  /** Reports how long storing the response took (for the completion latency metric). */
  recordCompletion?: (seconds: number, stored: boolean) => void;
  logger: Logger;
  problemTypeBaseUri: string;
  /** The module's `errorBody`, when set. */
  errorBody: IdempotencyErrorBodyRenderer | null;
  /** Logs once per route that its responses cannot be stored. */
  warnUnstorable: (why: string) => void;
  /** Status and headers the route set before its handler ran (its status, `@Header()`s). */
  before: ResponseSnapshot;
  /** The adapter's content type for string bodies. */
  textContentType: string;
  /**
   * Whether `@Idempotent()` marks the moment this route's handler starts. Where it cannot (a
   * route declared in a subclass of a decorated base class), the handler is taken to have
   * started: a request rejected by a pipe is then treated like the handler's own 4xx.
   */
  startMarked: boolean;
}

/** How a key is given back: `retry` lets the next request run; `forget` deletes the record. */
export type ReleaseMode = 'retry' | 'forget';

/** Why an execution ends without its response stored. */
export type ConcludeReason = 'not_final' | 'rejected_before_handler';

/** Why a key is given back, as its `released` event says. */
export type ReleaseReason = ConcludeReason | 'unstorable';

/**
 * An execution's store steps that do not depend on its stage, with the events they emit: the
 * part of `IdempotencyExecution` that talks to the store (its stages are in its own file).
 */
export abstract class ExecutionStoreSteps {
  /** The handler's transaction, on a run completed in it, until it commits or rolls back. */
  protected transaction?: IdempotencyStoreTransaction;

  /**
   * @param run - the run begun on the claimed record (its lease is renewed from then on)
   * @param route - options in force for the route
   * @param deps - services and facts about the route
   */
  constructor(
    readonly run: IdempotencyRun,
    protected readonly route: ResolvedIdempotencyRouteOptions,
    protected readonly deps: IdempotencyExecutionDeps,
  ) {}

  /** Emits `executed`: the handler ran, and whether its response was stored. */
  protected emitExecuted(status: number, stored: boolean): void {
    const { scope, key } = this.run.ref;
    const attempt = this.run.identity.attempt;
    this.deps.events.emit({ type: 'executed', scope, key, status, stored, attempt });
  }

  /** Emits `lock_lost` and warns: another instance took the key over before this one was done. */
  protected emitLockLost(during: 'complete' | 'release'): void {
    const { scope, key } = this.run.ref;
    this.deps.events.emit({ type: 'lock_lost', scope, key, during });
    this.deps.logger.warn(`Lost the lease of an idempotent request during ${during}`);
  }

  /**
   * Rolls the handler's transaction back (a failure is reported, not thrown), then gives the
   * key back (`retry`: to run again; `forget`: deleted) and says so, or that it was lost.
   */
  protected async release(mode: ReleaseMode, reason: ReleaseReason): Promise<void> {
    await this.rollback();
    const { ref } = this.run;
    try {
      const owned = await this.deps.store.release(ref, mode);
      if (!owned) this.emitLockLost('release');
      else this.deps.events.emit({ type: 'released', scope: ref.scope, key: ref.key, reason });
    } catch (error) {
      // The lease lapses on its own; a retry then takes the key over.
      this.deps.events.emit({ type: 'store_error', operation: 'release', error });
    }
  }

  /** Rolls the handler's transaction back, if one is open; a failure is reported, not thrown. */
  protected async rollback(): Promise<void> {
    const transaction = this.transaction;
    this.transaction = undefined;
    if (!transaction) return;
    try {
      await transaction.rollback();
    } catch (error) {
      this.deps.events.emit({ type: 'store_error', operation: 'rollback', error });
    }
  }

  /**
   * Completes the run in its transaction, which commits when the run still owns the key and rolls
   * back when not; times it for the completion metric.
   * @returns whether the run still owned the key
   */
  protected async completeAndCommit(
    transaction: IdempotencyStoreTransaction,
    stored: StoredResponse,
  ): Promise<boolean> {
    const started = performance.now();
    const { ref } = this.run;
    const { ttlSeconds } = this.route;
    const owned = transaction.completeAndCommit
      ? await transaction.completeAndCommit(ref, stored, ttlSeconds)
      : await transaction.complete(ref, stored, ttlSeconds);
    if (!transaction.completeAndCommit)
      await (owned ? transaction.commit() : transaction.rollback());
    this.deps.recordCompletion?.((performance.now() - started) / 1000, owned);
    return owned;
  }

  /**
   * What a failed completion outside a transaction ends in: a refusal when it committed without
   * confirmation (`notConfirmed`), else the handler's answer, not stored, logged loudly with
   * `executed` saying so.
   */
  protected notStored(outgoing: OutgoingResponse, error: unknown): ExecutionResult {
    if (isCommitUnconfirmed(error)) return this.notConfirmed(error);
    // The handler ran and its client gets its response; a retry after the lease lapses
    // runs it again. Logged loudly: this is the one window the store cannot close.
    this.deps.events.emit({ type: 'store_error', operation: 'complete', error });
    this.deps.logger.error(
      `Could not store the response of an idempotent request (${outgoing.status}); ` +
        'a retry after the lease lapses will run the handler again',
      error as Error,
    );
    this.emitExecuted(outgoing.status, false);
    return { kind: 'stored', answer: outgoing };
  }

  /**
   * The completion committed but the database did not confirm it (a stalled synchronous standby,
   * `IdempotencyCommitUnconfirmedError`): the record stands, so nothing is rolled back or
   * released, and its answer is not sent as a final one. The retry replays it, or runs once where
   * a failover lost it.
   */
  protected notConfirmed(error: unknown): ExecutionResult {
    this.deps.events.emit({ type: 'store_error', operation: 'complete', error });
    return this.refuse(IdempotencyProblemException.notConfirmed(this.route.retryAfterSeconds));
  }

  /** Emits the refusal's `rejected` event (its route named by the events this execution got). */
  protected refuse(problem: IdempotencyProblemException): ExecutionResult {
    emitRejected(this.deps.events, problem, this.run.ref);
    return { kind: 'refused', problem };
  }

  /** A refusal as the HTTP response its client gets. */
  protected render(problem: IdempotencyProblemException): OutgoingResponse {
    return renderProblem(problem, this.deps, this.deps.logger);
  }
}
