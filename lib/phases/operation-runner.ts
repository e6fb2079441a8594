import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { deriveKey } from '../context/idempotency-identity';
import { isDatabaseUnavailable } from '../storage/typeorm/database-unavailable';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyEvents } from '../events/idempotency.events';
import type { IdempotencyRun, OperationRunResult } from '../execution/idempotency-run';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import type { ResolvedIdempotencyPhasesOptions } from './idempotency-phases.options';
import type { IdempotencyStore } from '../storage/idempotency.store';
import type { OperationRecordStore, OperationStepTransaction } from './operation-record.store';
import type { OperationStep, StepOutcome } from './operation-step';
import { storedResponseOf } from '../execution/stored-response';
import { sendableResponse, UnsendableResponseError } from '../execution/sendable-response';
import type { RegisteredOperation } from './operation-registry';
import {
  isRetryableConflict,
  stagerOf,
  storableAsJson,
  unstorableState,
  untilAborted,
} from './operation-step-support';

/**
 * Runs an operation's steps from the record's recovery point to `finished` (docs/design/contract.md#operations-in-phases), for a
 * request, a retry or the completer alike: each gives the `IdempotencyRun` that owns the
 * record. A local step is one transaction that re-checks the owner and the recovery point under
 * the row lock, runs the step's writes and moves the record on; a foreign step runs outside any
 * transaction and its outcome is recorded by a compare-and-set right after it returns. Any
 * write by an owner that lost the record changes nothing, and the run ends as `lost`.
 */
export class OperationRunner {
  private readonly logger = new Logger('IdempotencyOperations');

  constructor(
    private readonly operations: OperationRecordStore,
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly options: Pick<ResolvedIdempotencyOptions, 'retryAfterSeconds'>,
    private readonly phases: Pick<
      ResolvedIdempotencyPhasesOptions,
      'maxAgeSeconds' | 'localStepAttempts' | 'foreignStepMarginSeconds'
    >,
  ) {}

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
    const bound = await this.operations
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
    const start = this.indexAfter(operation, bound.recoveryPoint);
    let state = bound.state;
    for (let index = start; index < operation.steps.length; index++) {
      const step = operation.steps[index];
      const expected = index === 0 ? 'started' : operation.steps[index - 1].name;
      const last = index === operation.steps.length - 1;
      const result =
        step.kind === 'local'
          ? await this.runLocal(operation, step, expected, bound.input, run, last)
          : await this.runForeign(operation, step, expected, bound.input, state, run, last);
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
   * database could not be reached (`isDatabaseUnavailable`) becomes 503
   * `idempotency_store_unavailable` with `Retry-After` (a `store_error` event carries the
   * original), as for a claim. The step rolled back and the key is released by the run's
   * owner, so a retry resumes at the same recovery point. A foreign step's own errors never
   * come here.
   */
  private failClosed(error: unknown, operation: string): never {
    if (!isDatabaseUnavailable(error)) throw error;
    this.events.emit({ type: 'store_error', operation, error });
    throw IdempotencyProblemException.storeUnavailable(this.options.retryAfterSeconds);
  }

  private indexAfter(operation: RegisteredOperation, recoveryPoint: string): number {
    if (recoveryPoint === 'started') return 0;
    const index = operation.steps.findIndex((step) => step.name === recoveryPoint);
    if (index < 0) {
      throw IdempotencyProblemException.operationUnavailable(
        `The record stands at recovery point "${recoveryPoint}", which operation ` +
          `"${operation.name}" does not have (was a step renamed?).`,
      );
    }
    return index + 1;
  }

  private async runLocal(
    operation: RegisteredOperation,
    step: Extract<OperationStep, { kind: 'local' }>,
    expected: string,
    input: unknown,
    run: IdempotencyRun,
    last: boolean,
  ): Promise<StepRunResult> {
    // The step reads the carried state under the row lock, as the record holds it.
    const isolation = step.options.isolation ?? 'READ COMMITTED';
    const attempts = this.phases.localStepAttempts;
    for (let attempt = 1; ; attempt++) {
      const tx = await this.operations
        .beginStep(run.ref, expected, isolation)
        .catch((error: unknown) => this.failClosed(error, `step "${step.name}"`));
      if (!tx) return { kind: 'lost' };
      try {
        // A step that outlives the lease must not keep the record locked (a retry would wait
        // on the lock instead of taking over) nor commit afterwards.
        const outcome = await untilAborted(
          step.run({
            ...this.context(input, tx.state, run),
            manager: tx.manager,
            stage: stagerOf(tx, run, step.name),
          }),
          run.lease.signal,
        );
        if (run.lease.signal.aborted) {
          await tx.abandon();
          return { kind: 'lost' };
        }
        const result = await this.settle(operation, step, expected, outcome, tx.state, run, {
          last,
          tx,
        });
        // A finished step committed in settle(), before this instance learnt of it.
        if (result.kind === 'proceeded') await tx.commit();
        else if (result.kind !== 'completed') await tx.rollback();
        if (result.kind === 'released') return this.release(run, result.reason);
        return result;
      } catch (error) {
        if (run.lease.signal.aborted) {
          await tx.abandon().catch(() => undefined);
          return { kind: 'lost' };
        }
        await tx.rollback().catch(() => undefined);
        if (attempt < attempts && isRetryableConflict(error)) {
          // Full jitter over a window that doubles, from 10 ms.
          await sleep(Math.random() * 10 * 2 ** (attempt - 1));
          continue;
        }
        return this.failClosed(error, `step "${step.name}"`);
      }
    }
  }

  private async runForeign(
    operation: RegisteredOperation,
    step: Extract<OperationStep, { kind: 'foreign' }>,
    expected: string,
    input: unknown,
    state: Record<string, unknown>,
    run: IdempotencyRun,
    last: boolean,
  ): Promise<StepRunResult> {
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
      outcome = await untilAborted(
        step.run({ ...this.context(input, state, run), signal }),
        signal,
      );
    } catch (error) {
      if (run.lease.signal.aborted) return { kind: 'lost' };
      if (timeout.aborted) {
        return this.release(run, `foreign step "${step.name}" ran past ${timeoutSeconds} s`);
      }
      throw error;
    }
    if (run.lease.signal.aborted) return { kind: 'lost' };
    const unrecordable = this.unrecordable(operation, step, outcome, state, run);
    if (unrecordable) {
      // The call happened and its outcome cannot be written: calling again is no answer.
      this.logger.error(
        `${unrecordable.message} The foreign call was made: the operation is abandoned for an ` +
          'operator (listAbandoned()) instead of calling it again.',
      );
      return this.abandon(run, operation.name, expected, 'unrecordable');
    }
    const result = await this.settle(operation, step, expected, outcome, state, run, {
      last,
    }).catch((error: unknown) => this.failClosed(error, `step "${step.name}"`));
    if (result.kind === 'released') return this.release(run, result.reason);
    return result;
  }

  /** Why the store cannot record what a step produced (its state or its response), if so. */
  private unrecordable(
    operation: RegisteredOperation,
    step: OperationStep,
    outcome: StepOutcome,
    carried: Record<string, unknown>,
    run: IdempotencyRun,
  ): Error | undefined {
    try {
      if (outcome?.kind === 'proceed' && !storableAsJson({ ...carried, ...outcome.state })) {
        throw unstorableState(operation.name, step.name);
      }
      if (outcome?.kind === 'respond') {
        this.render(operation.name, step.name, outcome, run);
        if (!storableAsJson(carried)) throw unstorableState(operation.name, step.name);
      }
      return undefined;
    } catch (error) {
      return error as Error;
    }
  }

  /** Hands the record to an operator: it is never run again automatically. */
  private async abandon(
    run: IdempotencyRun,
    operation: string,
    recoveryPoint: string | null,
    reason: 'max_age' | 'unrecordable',
  ): Promise<OperationRunResult> {
    run.lease.stop();
    if (!(await this.operations.abandon(run.ref))) return { kind: 'lost' };
    this.events.emit({
      type: 'operation_abandoned',
      scope: run.ref.scope,
      key: run.ref.key,
      operation,
      recoveryPoint,
      reason,
    });
    return { kind: 'abandoned' };
  }

  /** Records a step's outcome: moves the record on, or finishes it; in `tx` when given. */
  private async settle(
    operation: RegisteredOperation,
    step: OperationStep,
    expected: string,
    outcome: StepOutcome,
    carried: Record<string, unknown>,
    run: IdempotencyRun,
    { last, tx }: { last: boolean; tx?: OperationStepTransaction },
  ): Promise<StepRunResult> {
    switch (outcome?.kind) {
      case 'proceed': {
        if (last) {
          throw IdempotencyProblemException.operationUnavailable(
            `The last step of "${operation.name}" ("${step.name}") must respond, not proceed.`,
          );
        }
        const state = { ...carried, ...outcome.state };
        if (!storableAsJson(state)) throw unstorableState(operation.name, step.name);
        const moved = await this.operations.advance(run.ref, expected, step.name, state, tx);
        if (!moved) return { kind: 'lost' };
        return { kind: 'proceeded', state };
      }
      case 'respond': {
        const { stored, outgoing } = this.render(operation.name, step.name, outcome, run);
        if (!storableAsJson(carried)) throw unstorableState(operation.name, step.name);
        // The heartbeat would find the finished record no longer in flight and report a loss.
        run.lease.stop();
        const { ttlSeconds } = run.settings;
        const done = await this.operations.finish(
          run.ref,
          expected,
          carried,
          stored,
          ttlSeconds,
          tx,
        );
        if (!done) return { kind: 'lost' };
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

  private async release(run: IdempotencyRun, reason: string): Promise<StepRunResult> {
    run.lease.stop();
    if (!(await this.store.release(run.ref, 'retry'))) return { kind: 'lost' };
    this.events.emit({
      type: 'released',
      scope: run.ref.scope,
      key: run.ref.key,
      reason: 'retry_later',
    });
    return { kind: 'released', reason };
  }

  private context(input: unknown, state: Record<string, unknown>, run: IdempotencyRun) {
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
    operation: string,
    step: string,
    outcome: Extract<StepOutcome, { kind: 'respond' }>,
    run: IdempotencyRun,
  ): { stored: StoredResponse; outgoing: StoredResponse } {
    let outgoing: StoredResponse;
    try {
      outgoing = sendableResponse(outcome);
    } catch (error) {
      if (!(error instanceof UnsendableResponseError)) throw error;
      throw IdempotencyProblemException.operationUnavailable(
        `Step "${step}" of "${operation}" responded with ${error.why}; nothing was stored.`,
      );
    }
    return { stored: storedResponseOf(outgoing, run.settings), outgoing };
  }
}

/** A step's result inside the runner. */
type StepRunResult = OperationRunResult | { kind: 'proceeded'; state: Record<string, unknown> };
