import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { deriveKey } from '../context/idempotency-identity';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import type { IdempotencyStoreCapabilities } from '../storage/idempotency-store.capabilities';
import { IDEMPOTENCY_PHASES_OPTIONS } from './idempotency-phases.tokens';
import type { IdempotencyRun, OperationRunResult } from '../execution/idempotency-run';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import type { ResolvedIdempotencyPhasesOptions } from './idempotency-phases.options';
import { IdempotencyStore } from '../storage/idempotency.store';
import type { OperationRecordStore, OperationStepTransaction } from './operation-record.store';
import type { OperationStep, StepOutcome } from './operation-step';
import { storedResponseOf } from '../execution/stored-response';
import { storeUnavailable } from '../execution/store-unavailable';
import { sendableResponse, UnsendableResponseError } from '../execution/sendable-response';
import type { RegisteredOperation } from './operation-registry';
import { abandonedEvent } from './operation-events';
import {
  isRetryableConflict,
  stagerOf,
  storableAsJson,
  untilAborted,
} from './operation-step-support';

type LocalStep = Extract<OperationStep, { kind: 'local' }>;
type ForeignStep = Extract<OperationStep, { kind: 'foreign' }>;

/** One step to run, and where it stands in its operation's run. */
interface StepCall<Step extends OperationStep = OperationStep> {
  readonly operation: RegisteredOperation;
  readonly step: Step;
  /** The recovery point the record must stand at: the previous step's name, or `started`. */
  readonly expected: string;
  /** The operation's input, as the record holds it. */
  readonly input: unknown;
  readonly run: IdempotencyRun;
  readonly last: boolean;
}

/**
 * Runs an operation's steps from the record's recovery point to `finished` (docs/design/contract.md#operations-in-phases), for a
 * request, a retry or the completer alike: each gives the `IdempotencyRun` that owns the
 * record. A local step is one transaction that re-checks the owner and the recovery point under
 * the row lock, runs the step's writes and moves the record on; a foreign step runs outside any
 * transaction and its outcome is recorded by a compare-and-set right after it returns. Any
 * write by an owner that lost the record changes nothing, and the run ends as `lost`. Internal.
 */
@Injectable()
export class OperationRunner {
  private readonly logger = new Logger('IdempotencyOperations');
  /** The store's ability to run operations in phases: undefined with a store that has none. */
  readonly operations: OperationRecordStore | undefined;

  constructor(
    private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES) capabilities: IdempotencyStoreCapabilities,
    private readonly events: IdempotencyEvents,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_PHASES_OPTIONS) private readonly phases: ResolvedIdempotencyPhasesOptions,
  ) {
    this.operations = capabilities.operations;
  }

  /**
   * The store's ability to run operations in phases (the TypeORM store has it: they need
   * PostgreSQL transactions).
   * @throws IdempotencyProblemException 500 `idempotency_operation_unavailable` when it has none
   */
  records(): OperationRecordStore {
    if (this.operations) return this.operations;
    throw IdempotencyProblemException.operationUnavailable(
      'Operations in phases need the TypeORM store (PostgreSQL transactions).',
    );
  }

  /**
   * Runs (or resumes) `operation` on the record `run` owns.
   * @param input - the input given now; a resumed operation uses the one stored at its start
   * @throws what a step threw (not an outcome): the record stays at its recovery point and the
   *   run's owner releases the key
   */
  async run(
    operation: RegisteredOperation,
    input: unknown,
    run: IdempotencyRun,
  ): Promise<OperationRunResult> {
    const { ref } = run;
    if (!storableAsJson(input)) {
      throw IdempotencyProblemException.operationInputInvalid(
        'The request holds a NUL character (\\u0000) in a text value, which cannot be stored. ' +
          'Nothing was processed; send the request without it.',
      );
    }
    const bound = await this.records()
      .bind(ref, operation.name, input, run.settings)
      .catch((error: unknown) => this.failClosed(error, 'bind'));
    if (!bound) return { kind: 'lost' };
    if (bound.operation !== operation.name) {
      throw IdempotencyProblemException.operationUnavailable(
        `This key already runs operation "${bound.operation}", not "${operation.name}".`,
      );
    }
    if (bound.resumed && bound.ageSeconds > this.phases.maxAgeSeconds) {
      return this.abandon(run, operation.name, bound.recoveryPoint, 'max_age');
    }
    const { steps } = operation;
    let state = bound.state;
    const start = this.indexAfter(operation, bound.recoveryPoint);
    for (let index = start; index < steps.length; index++) {
      const step = steps[index];
      const expected = index === 0 ? 'started' : steps[index - 1].name;
      const at = { operation, expected, input: bound.input, run, last: index === steps.length - 1 };
      const result =
        step.kind === 'local'
          ? await this.runLocal({ ...at, step })
          : await this.runForeign({ ...at, step }, state);
      // A step that asked to be retried later gives the key back once its transaction ended.
      if (result.kind === 'released') return this.release(run, result.reason);
      if (result.kind !== 'proceeded') return result;
      state = result.state;
      this.events.emit({
        type: 'operation_advanced',
        scope: ref.scope,
        key: ref.key,
        operation: operation.name,
        recoveryPoint: step.name,
      });
    }
    // Only reached when the record was already past its last step, which `finished` excludes.
    return { kind: 'lost' };
  }

  /**
   * Rethrows a failure of the store or of a local step's transaction; one that means the
   * store could not be reached (as `IdempotencyStore.isUnavailable()` tells) becomes 503
   * `idempotency_store_unavailable` with `Retry-After` (a `store_error` event carries the
   * original), as for a claim. The step rolled back and the key is released by the run's
   * owner, so a retry resumes at the same recovery point. A foreign step's own errors never
   * come here.
   */
  private failClosed(error: unknown, operation: string): never {
    if (!this.store.isUnavailable(error)) throw error;
    throw storeUnavailable(this.events, { operation, error }, this.options.retryAfterSeconds);
  }

  private indexAfter(operation: RegisteredOperation, recoveryPoint: string): number {
    if (recoveryPoint === 'started') return 0;
    const index = operation.steps.findIndex((step) => step.name === recoveryPoint);
    if (index >= 0) return index + 1;
    throw IdempotencyProblemException.operationUnavailable(
      `The record stands at recovery point "${recoveryPoint}", which operation ` +
        `"${operation.name}" does not have (was a step renamed?).`,
    );
  }

  private async runLocal(call: StepCall<LocalStep>): Promise<StepRunResult> {
    const { step, run } = call;
    // The step reads the carried state under the row lock, as the record holds it.
    const isolation = step.options.isolation ?? 'READ COMMITTED';
    const failed = (error: unknown) => this.failClosed(error, `step "${step.name}"`);
    for (let attempt = 1; ; attempt++) {
      const tx = await this.records().beginStep(run.ref, call.expected, isolation).catch(failed);
      if (!tx) return { kind: 'lost' };
      try {
        // A step that outlives the lease must not keep the record locked (a retry would wait
        // on the lock instead of taking over) nor commit afterwards.
        const outcome = await untilAborted(
          step.run({
            ...this.context(call, tx.state),
            manager: tx.manager,
            stage: stagerOf(tx, run, step.name),
          }),
          run.lease.signal,
        );
        if (run.lease.signal.aborted) {
          await tx.abandon();
          return { kind: 'lost' };
        }
        const result = await this.settle(call, outcome, tx.state, tx);
        // A finished step committed in settle(), before this instance learnt of it.
        if (result.kind === 'proceeded') await tx.commit();
        else if (result.kind !== 'completed') await tx.rollback();
        return result;
      } catch (error) {
        if (run.lease.signal.aborted) {
          await tx.abandon().catch(() => undefined);
          return { kind: 'lost' };
        }
        await tx.rollback().catch(() => undefined);
        if (attempt < this.phases.localStepAttempts && isRetryableConflict(error)) {
          // Full jitter over a window that doubles, from 10 ms.
          await sleep(Math.random() * 10 * 2 ** (attempt - 1));
          continue;
        }
        return failed(error);
      }
    }
  }

  private async runForeign(
    call: StepCall<ForeignStep>,
    state: Record<string, unknown>,
  ): Promise<StepRunResult> {
    const { operation, step, run } = call;
    const { timeoutSeconds } = step.options;
    const needMs = (timeoutSeconds + this.phases.foreignStepMarginSeconds) * 1000;
    if (!(await run.lease.ensureRemaining(needMs))) {
      if (run.lease.signal.aborted) return { kind: 'lost' };
      throw IdempotencyProblemException.operationUnavailable(
        `Foreign step "${step.name}" of "${operation.name}" needs ${needMs / 1000} s of lease ` +
          '(its timeoutSeconds plus foreignStepMarginSeconds), more than execution.lockTimeoutSeconds.',
      );
    }
    const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
    const signal = AbortSignal.any([run.lease.signal, timeout]);
    let outcome: StepOutcome;
    try {
      outcome = await untilAborted(step.run({ ...this.context(call, state), signal }), signal);
    } catch (error) {
      if (run.lease.signal.aborted) return { kind: 'lost' };
      if (!timeout.aborted) throw error;
      return {
        kind: 'released',
        reason: `foreign step "${step.name}" ran past ${timeoutSeconds} s`,
      };
    }
    if (run.lease.signal.aborted) return { kind: 'lost' };
    try {
      // What settle() checks before it writes: a state or a response the store cannot record.
      if (outcome?.kind === 'proceed') this.storable(call, { ...state, ...outcome.state });
      if (outcome?.kind === 'respond') {
        this.render(call, outcome);
        this.storable(call, state);
      }
    } catch (unrecordable) {
      // The call happened and its outcome cannot be written: calling again is no answer.
      this.logger.error(
        `${(unrecordable as Error).message} The foreign call was made: the operation is ` +
          'abandoned for an operator (listAbandoned()) instead of calling it again.',
      );
      return this.abandon(run, operation.name, call.expected, 'unrecordable');
    }
    return this.settle(call, outcome, state).catch((error: unknown) =>
      this.failClosed(error, `step "${step.name}"`),
    );
  }

  /** Throws when a step's state cannot be stored (a NUL character in a string). */
  private storable(call: StepCall, state: Record<string, unknown>): Record<string, unknown> {
    if (storableAsJson(state)) return state;
    throw IdempotencyProblemException.operationUnavailable(
      `Step "${call.step.name}" of "${call.operation.name}" produced state with a NUL character ` +
        '(\\u0000) in a string, which cannot be stored; nothing was stored.',
    );
  }

  /** Hands the record to an operator: it is never run again automatically. */
  private async abandon(
    run: IdempotencyRun,
    operation: string,
    recoveryPoint: string | null,
    reason: 'max_age' | 'unrecordable',
  ): Promise<OperationRunResult> {
    run.lease.stop();
    if (!(await this.records().abandon(run.ref))) return { kind: 'lost' };
    const { scope, key } = run.ref;
    this.events.emit(abandonedEvent({ scope, key, operation, recoveryPoint }, reason));
    return { kind: 'abandoned' };
  }

  /** Records a step's outcome: moves the record on, or finishes it; in `tx` when given. */
  private async settle(
    call: StepCall,
    outcome: StepOutcome,
    carried: Record<string, unknown>,
    tx?: OperationStepTransaction,
  ): Promise<StepRunResult> {
    const { operation, step, run, expected } = call;
    switch (outcome?.kind) {
      case 'proceed': {
        if (call.last) {
          throw IdempotencyProblemException.operationUnavailable(
            `The last step of "${operation.name}" ("${step.name}") must respond, not proceed.`,
          );
        }
        const state = this.storable(call, { ...carried, ...outcome.state });
        const moved = await this.records().advance(run.ref, expected, step.name, state, tx);
        return moved ? { kind: 'proceeded', state } : { kind: 'lost' };
      }
      case 'respond': {
        const { stored, outgoing } = this.render(call, outcome);
        this.storable(call, carried);
        // The heartbeat would find the finished record no longer in flight and report a loss.
        run.lease.stop();
        const { ttlSeconds } = run.settings;
        if (!(await this.records().finish(run.ref, expected, carried, stored, ttlSeconds, tx))) {
          return { kind: 'lost' };
        }
        if (tx) await tx.commit();
        this.events.emit({
          type: 'operation_finished',
          scope: run.ref.scope,
          key: run.ref.key,
          operation: operation.name,
          status: stored.status,
        });
        return { kind: 'completed', stored, outgoing, body: outcome.body };
      }
      case 'retry_later':
        return { kind: 'released', reason: outcome.reason };
      default:
        throw IdempotencyProblemException.operationUnavailable(
          `Step "${step.name}" of "${operation.name}" returned no outcome: return proceed(), ` +
            'respond() or retryLater().',
        );
    }
  }

  private async release(run: IdempotencyRun, reason: string): Promise<OperationRunResult> {
    run.lease.stop();
    if (!(await this.store.release(run.ref, 'retry'))) return { kind: 'lost' };
    const { scope, key } = run.ref;
    this.events.emit({ type: 'released', scope, key, reason: 'retry_later' });
    return { kind: 'released', reason };
  }

  private context({ input, run }: StepCall, state: Record<string, unknown>) {
    return {
      input,
      state,
      identity: { ...run.identity },
      derivedKey: (label: string) => deriveKey(run.identity.recordId, label),
    };
  }

  /**
   * The step's response as stored (allow-listed headers) and as sent (every header). Checked
   * before anything is stored: a response Node would refuse to send is never committed.
   */
  private render(
    { operation, step, run }: StepCall,
    outcome: Extract<StepOutcome, { kind: 'respond' }>,
  ): { stored: StoredResponse; outgoing: StoredResponse } {
    try {
      const outgoing = sendableResponse(outcome);
      return { stored: storedResponseOf(outgoing, run.settings), outgoing };
    } catch (error) {
      if (!(error instanceof UnsendableResponseError)) throw error;
      throw IdempotencyProblemException.operationUnavailable(
        `Step "${step.name}" of "${operation.name}" responded with ${error.why}; nothing was stored.`,
      );
    }
  }
}

/** A step's result inside the runner: `released` is given back by `run()` once the step ended. */
type StepRunResult = OperationRunResult | { kind: 'proceeded'; state: Record<string, unknown> };
