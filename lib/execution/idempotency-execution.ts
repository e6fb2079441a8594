import type { CallHandler } from '@nestjs/common';
import { Observable } from 'rxjs';
import { idempotencyRunScopes } from '../context/idempotency-run-scope';
import type { IdempotencyRunScope } from '../context/idempotency-run-scope';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { isCommitUnconfirmed } from '../storage/commit-unconfirmed.error';
import type { ResponseSink } from '../http/response-sink.interface';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type {
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { OutgoingResponse } from '../utils/response-bytes';
import { renderHandlerOutcome } from './handler-outcome';
import type { HandlerOutcome } from './handler-outcome';
import type { IdempotencyRun } from './idempotency-run';
import { isSendable } from './sendable-response';
import { storedResponseOf } from './stored-response';
import { ExecutionStoreSteps } from './execution-store-steps';
import { storeUnavailable } from './store-unavailable';
import { rejectOnThrow } from '../utils/reject-on-throw';
import type {
  ConcludeReason,
  IdempotencyExecutionDeps,
  ReleaseMode,
} from './execution-store-steps';
import { answeredWith, INTERNAL_ERROR, RELEASED } from './execution-result';
import type { ExecutionResult, ExecutionStage } from './execution-result';

/**
 * One claimed request, from its claim to its end: its run (the record's ref, identity and
 * lease), its transaction, its handler's own settlement, its response and whether that
 * response is stored or the key released. Every rule about one request's life is here. What
 * "stored" means is the run's completion, fixed when the run began: `response` (the plain
 * completion), `transaction` (inside the handler's transaction, which then commits), or
 * `operation` (an operation in phases took the run over; only its last step completes the
 * record):
 *
 * | stage    | event                                                   | what happens                                                                  |
 * | -------- | ------------------------------------------------------- | ----------------------------------------------------------------------------- |
 * | begun    | `begin()` (the run's lease is already renewed)          | a run completed in a transaction opens it                                     |
 * | running  | the handler's own code writes a response (`@Res()`)     | held until the handler settles, then decided                                  |
 * | running  | a response leaves from elsewhere (outer timeout's 408)  | written as it is, not stored; the key stays claimed                           |
 * | running  | the response streams (chunks, a file)                   | noted; decided when the handler settles                                       |
 * | running  | the handler settles (completes or throws)               | a throw rolls the transaction back; a held response is decided (or, when the handler threw after writing it, its failure is); after an early response the handler's own outcome is decided; after a stream the key is released; else → settled |
 * | settled  | the response is about to be written                     | decided, then written                                                         |
 * | settled  | the response streamed                                   | key released                                                                  |
 * | deciding | completion `operation`                                  | heartbeat stops; once the operation settles: it completed → its stored response is the answer; it released, lost or abandoned the record in its own commits → nothing more is done; it threw → released at its recovery point, and the handler's answer (never stored) is written |
 * | deciding | completion `response` or `transaction`                  | heartbeat stops; rejected before the handler started → record deleted; not bytes → released (warned once per route); status not final → released; final → stored (in the transaction, which then commits) before it is written |
 * | done     | anything                                                | ignored                                                                       |
 *
 * The key is therefore held until the handler's own work has settled, whoever wrote a
 * response first, and the handler never runs twice under one claim.
 */
export class IdempotencyExecution extends ExecutionStoreSteps implements ResponseSink {
  private stage: ExecutionStage = 'begun';
  private outcome?: HandlerOutcome;
  private held?: {
    outgoing: OutgoingResponse;
    answer: (decision: Promise<ExecutionResult | undefined>) => void;
  };
  private leftEarly = false;
  private streamed = false;
  private subscribed = false;
  /** What the handler (and the services it calls) reach through `IdempotencyContext`. */
  readonly runScope: IdempotencyRunScope;

  /**
   * @param run - the run begun on the claimed record (its lease is renewed from then on)
   * @param route - options in force for the route
   * @param deps - services and facts about the route
   */
  constructor(
    run: IdempotencyRun,
    route: ResolvedIdempotencyRouteOptions,
    deps: IdempotencyExecutionDeps,
  ) {
    super(run, route, deps);
    this.runScope = { run, handlerStarted: false };
  }

  /**
   * Opens the transaction of a run completed in it (a `transactional: true` route).
   * @throws when the store cannot open the transaction; call `abort()` then
   */
  async begin(): Promise<void> {
    if (this.run.completion !== 'transaction') return;
    this.transaction = await this.deps.store.beginTransaction();
    this.runScope.manager = this.transaction.manager;
  }

  /** Gives the key back when the handler never ran (`begin()` failed, or nobody subscribed). */
  abort(): Promise<void> {
    return this.conclude('forget', 'rejected_before_handler');
  }

  /**
   * Gives the key back after the handler threw, on a call that is not an HTTP request (a
   * message, a mutation): nothing is stored, and the next delivery runs the handler again.
   */
  giveBack(): Promise<void> {
    return this.conclude('retry', 'not_final');
  }

  /**
   * Runs the handler once. Its work is followed to the end even when the caller stops
   * listening (an outer `timeout()`), because its outcome decides what happens to the key.
   * @param next - the handler, as the interceptor received it
   */
  handle(next: CallHandler): Observable<unknown> {
    return new Observable((subscriber) => {
      if (this.subscribed) {
        // An outer retry() would run the handler a second time under one claim.
        subscriber.error(new Error('nest-idempotency: an idempotent handler was subscribed twice'));
        return;
      }
      this.subscribed = true;
      this.stage = 'running';
      let last: unknown;
      idempotencyRunScopes.run(this.runScope, () =>
        next.handle().subscribe({
          next: (value) => subscriber.next((last = value)),
          error: (error) => {
            const thrown = this.failClosed(error);
            void this.settleFailure(thrown).then(() => subscriber.error(thrown));
          },
          complete: () => {
            this.settle({ kind: 'value', value: last });
            subscriber.complete();
          },
        }),
      );
      // No teardown: unsubscribing must not cancel the handler's work.
    });
  }

  /** @inheritDoc */
  onResponse(outgoing: OutgoingResponse | undefined): Promise<OutgoingResponse | undefined> {
    return this.decision(outgoing).then((result) =>
      result?.kind === 'refused' ? this.render(result.problem) : result?.answer,
    );
  }

  /** What a response about to be written comes to: decided now, once the handler settles, or not. */
  private decision(outgoing: OutgoingResponse | undefined): Promise<ExecutionResult | undefined> {
    if (this.stage === 'settled') return this.respond(outgoing);
    if (this.stage !== 'begun' && this.stage !== 'running') return Promise.resolve(undefined);
    if (outgoing === undefined) {
      this.streamed = true;
    } else if (idempotencyRunScopes.current() === this.runScope) {
      // Written by the handler's own code (@Res()): stored once the handler has settled.
      return new Promise((answer) => (this.held = { outgoing, answer }));
    } else {
      this.leftEarly = true;
    }
    return Promise.resolve(undefined);
  }

  /** @inheritDoc */
  onResponseEnded(): void {
    if (this.stage === 'settled') void this.respond(undefined);
    else if (this.stage === 'begun' || this.stage === 'running') this.streamed = true;
  }

  /** @inheritDoc */
  onWriteFailed(error: unknown): void {
    this.deps.logger.error(
      'Could not write the response of an idempotent request; the client got a 500',
      error as Error,
    );
  }

  /**
   * A handler that threw because its run's transaction lost its connection (cut, failover) met
   * an unreachable store, as the store tells: 503 `idempotency_store_unavailable`, as for a
   * claim, not a bare 500.
   */
  private failClosed(error: unknown): unknown {
    const { store, events } = this.deps;
    if (this.run.completion !== 'transaction' || !store.isUnavailable(error)) return error;
    return storeUnavailable(
      events,
      { operation: 'transaction', error },
      this.route.retryAfterSeconds,
    );
  }

  /** The handler threw: its writes are rolled back before anything answers its client. */
  private settleFailure(error: unknown): Promise<void> {
    this.outcome = { kind: 'error', error };
    return this.rollback().then(() => this.settle(this.outcome!));
  }

  /** The handler settled (its writes rolled back first when it threw). */
  private settle(outcome: HandlerOutcome): void {
    this.outcome = outcome;
    if (this.stage !== 'running') return;
    this.stage = 'settled';
    const held = this.held;
    this.held = undefined;
    if (held && outcome.kind === 'error') held.answer(this.decideOwnOutcome(outcome));
    else if (held) held.answer(this.respond(held.outgoing));
    else if (this.leftEarly) void this.decideOwnOutcome(outcome);
    else if (this.streamed) void this.respond(undefined);
  }

  /**
   * Decides on what the handler itself produced, when no response of its own is to be decided:
   * one left early (an outer timeout's 408), or the one it wrote (`@Res()`) no longer stands
   * because it threw afterwards and its transaction was rolled back.
   * @returns what its client should get
   */
  private async decideOwnOutcome(outcome: HandlerOutcome): Promise<ExecutionResult> {
    // One of the library's own errors (a cut transaction's 503) as its exception filter writes it.
    const own =
      outcome.kind === 'error' && outcome.error instanceof IdempotencyProblemException
        ? this.render(outcome.error)
        : renderHandlerOutcome(outcome, this.deps.before, this.deps.textContentType);
    if (own || outcome.kind === 'value') return answeredWith(await this.respond(own), own);
    if (this.run.completion === 'operation') {
      return answeredWith(await this.respond(undefined), INTERNAL_ERROR);
    }
    await this.conclude('retry', 'not_final');
    return { kind: 'released', answer: INTERNAL_ERROR };
  }

  /** Ends the execution by giving the key back, with no response to store. */
  private async conclude(mode: ReleaseMode, reason: ConcludeReason): Promise<void> {
    this.stage = 'deciding';
    this.run.lease.stop();
    await this.release(mode, reason);
    this.finish();
  }

  /**
   * Decides what becomes of the response and of the key, once. A response to store (most
   * requests) goes straight to `store()`, without an async function around it. Called directly
   * with the answer of a handler that settled on a call that is not an HTTP request.
   * @param outgoing - the response about to be written (the handler's value, as the response
   *   kept in its record, on a call); undefined when it is not bytes
   * @returns what the decision came to; undefined when the execution had already ended
   */
  respond(outgoing: OutgoingResponse | undefined): Promise<ExecutionResult | undefined> {
    if (this.stage === 'deciding' || this.stage === 'done') return Promise.resolve(undefined);
    this.stage = 'deciding';
    this.run.lease.stop();
    const storable =
      outgoing !== undefined &&
      this.run.completion !== 'operation' &&
      this.handlerStarted() &&
      this.route.storeStatuses.includes(outgoing.status) &&
      isSendable(outgoing);
    return storable ? this.store(outgoing) : this.decideWithoutStoring(outgoing);
  }

  /** Every decision but storing the response: the operation's, or giving the key back. */
  private async decideWithoutStoring(
    outgoing: OutgoingResponse | undefined,
  ): Promise<ExecutionResult> {
    try {
      if (this.run.completion === 'operation') return await this.concludeOperation(outgoing);
      if (!this.handlerStarted()) {
        await this.release('forget', 'rejected_before_handler');
        return RELEASED;
      }
      if (!outgoing) {
        this.deps.warnUnstorable('it is not sent as bytes (a stream, a file or SSE)');
        await this.release('retry', 'unstorable');
        return RELEASED;
      }
      // A status that is not final (not in `storeStatuses`).
      await this.release('retry', 'not_final');
      this.emitExecuted(outgoing.status, false);
      return RELEASED;
    } finally {
      this.finish();
    }
  }

  /**
   * The run's operation concludes it. Once the operation settles: one that finished stored its
   * response in its own last commit, and the client gets exactly that response; one that
   * released, lost or abandoned the record did so in its own commits, and the client gets the
   * handler's answer (a 503 to retry later, a 409) with nothing more done; one that threw left
   * the record at its recovery point, where it is released — never completed with the
   * handler's answer, which a retry would otherwise replay for an unfinished operation.
   */
  private async concludeOperation(
    outgoing: OutgoingResponse | undefined,
  ): Promise<ExecutionResult> {
    const conclusion = await this.run.operationConclusion();
    if (conclusion?.kind === 'completed') {
      this.emitExecuted(conclusion.outgoing.status, true);
      return { kind: 'stored', answer: conclusion.outgoing };
    }
    if (conclusion?.kind === 'failed') await this.release('retry', 'not_final');
    if (outgoing) this.emitExecuted(outgoing.status, false);
    return RELEASED;
  }

  private handlerStarted(): boolean {
    return this.outcome?.kind === 'value' || this.runScope.handlerStarted || !this.deps.startMarked;
  }

  /** Stores the response (in the handler's transaction, which then commits, on such a route). */
  private store(outgoing: OutgoingResponse): Promise<ExecutionResult> {
    const transaction = this.transaction;
    this.transaction = undefined;
    let stored: StoredResponse;
    const started = performance.now();
    try {
      stored = storedResponseOf(outgoing, this.route);
    } catch (error) {
      if (transaction) void transaction.rollback().catch(() => undefined);
      this.finish();
      return Promise.reject(error);
    }
    if (transaction) return this.storeInTransaction(transaction, stored, outgoing);
    const { ref } = this.run;
    return rejectOnThrow(() => this.deps.store.complete(ref, stored, this.route.ttlSeconds)).then(
      (owned) => {
        this.finish();
        this.deps.recordCompletion?.((performance.now() - started) / 1000, owned);
        if (!owned) this.emitLockLost('complete');
        this.emitExecuted(outgoing.status, owned);
        return { kind: 'stored', answer: outgoing };
      },
      (error: unknown) => {
        this.finish();
        return this.notStored(outgoing, error);
      },
    );
  }

  /**
   * The execution is over: the handler's code, wherever it still runs, reaches its run no more
   * (`IdempotencyContext` is empty there), and the last live run turns the storage off.
   */
  private finish(): void {
    this.stage = 'done';
    idempotencyRunScopes.end(this.runScope);
  }

  /**
   * The completion commits with the handler's writes, or neither does and the client is told;
   * the execution is done once it settles.
   */
  private async storeInTransaction(
    transaction: IdempotencyStoreTransaction,
    stored: StoredResponse,
    outgoing: OutgoingResponse,
  ): Promise<ExecutionResult> {
    try {
      if (!(await this.completeAndCommit(transaction, stored))) {
        this.emitLockLost('complete');
        return this.refuse(IdempotencyProblemException.leaseLost(this.route.retryAfterSeconds));
      }
      this.emitExecuted(outgoing.status, true);
      return { kind: 'stored', answer: outgoing };
    } catch (error) {
      if (isCommitUnconfirmed(error)) return this.notConfirmed(error);
      this.deps.events.emit({ type: 'store_error', operation: 'complete', error });
      await transaction.rollback().catch(() => undefined);
      await this.release('retry', 'not_final');
      return this.refuse(IdempotencyProblemException.notStored(this.route.retryAfterSeconds));
    } finally {
      this.finish();
    }
  }
}
