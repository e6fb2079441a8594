import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IdempotencyRequestIdentity } from '../context/idempotency.context';
import { deriveKey } from '../context/idempotency.context';
import { isDatabaseUnavailable } from '../storage/typeorm/database-unavailable';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyEvents } from '../events/idempotency.events';
import type { LeaseHeartbeat } from '../execution/lease-heartbeat';
import type {
  IdempotencyRecordRef,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';
import { LocalFirstIdempotencyStore } from '../storage/local-first-idempotency.store';
import type { TypeOrmJobStore } from '../storage/typeorm/typeorm-job.store';
import type { StepTransaction, TypeOrmPhaseStore } from '../storage/typeorm/typeorm-phase.store';
import { responseBytes } from '../utils/response-bytes';
import type { OperationStep, StepOutcome } from './operation-step';
import type { RegisteredOperation } from './operation-registry';

/** One run of an operation: the record it owns and the settings it answers with. */
export interface OperationRunTarget {
  ref: IdempotencyRecordRef;
  identity: IdempotencyRequestIdentity;
  lease: LeaseHeartbeat;
  ttlSeconds: number;
  replayHeaders: readonly string[];
}

/** How a run ended. */
export type OperationRunResult =
  | {
      kind: 'completed';
      /** What was stored (allow-listed headers) and is replayed. */
      stored: StoredResponse;
      /** What this run's client gets: the stored status and bytes, every header the step set. */
      outgoing: StoredResponse;
      body: unknown;
    }
  | { kind: 'released'; reason: string }
  | { kind: 'lost' }
  | { kind: 'abandoned' };

/** PostgreSQL aborted the transaction to keep it serializable, or to break a deadlock. */
function isRetryableConflict(error: unknown): boolean {
  const code = (error as { code?: string; driverError?: { code?: string } })?.code;
  const driverCode = (error as { driverError?: { code?: string } })?.driverError?.code;
  return [code, driverCode].some((c) => c === '40001' || c === '40P01');
}

/**
 * Runs an operation's steps from the record's recovery point to `finished` (SPEC §8), for a
 * request, a retry or the completer alike. A local step is one transaction that re-checks the
 * owner and the recovery point under the row lock, runs the step's writes and moves the record
 * on; a foreign step runs outside any transaction and its outcome is recorded by a
 * compare-and-set right after it returns. Any write by an owner that lost the record changes
 * nothing, and the run ends as `lost`.
 */
export class OperationRunner {
  constructor(
    private readonly store: IdempotencyStore,
    private readonly phases: TypeOrmPhaseStore,
    private readonly jobs: TypeOrmJobStore,
    private readonly events: IdempotencyEvents,
    private readonly options: Pick<ResolvedIdempotencyOptions, 'phases' | 'retryAfterSeconds'>,
  ) {}

  /**
   * Runs (or resumes) `operation` on the record `target.ref` owns.
   * @param input - the input given now; a resumed operation uses the one stored at its start
   * @throws what a step threw (not an outcome): the caller releases the key
   */
  async run(
    operation: RegisteredOperation,
    input: unknown,
    target: OperationRunTarget,
  ): Promise<OperationRunResult> {
    const { ref } = target;
    const bound = await this.phases
      .bind(ref, operation.name, input)
      .catch((error: unknown) => this.failClosed(error, 'bind'));
    if (!bound) return this.lost(target) as OperationRunResult;
    if (bound.operation !== operation.name) {
      throw IdempotencyProblemException.operationUnavailable(
        `This key already runs operation "${bound.operation}", not "${operation.name}".`,
      );
    }
    if (bound.resumed && bound.ageSeconds > this.options.phases.maxAgeSeconds) {
      target.lease.stop();
      const abandoned = await this.phases.abandon(ref);
      this.localFirst?.settledElsewhere(ref);
      if (!abandoned) return { kind: 'lost' };
      this.emitAbandoned(ref, operation.name, bound.recoveryPoint, 'max_age');
      return { kind: 'abandoned' };
    }
    const start = this.indexAfter(operation, bound.recoveryPoint);
    let state = bound.state;
    for (let index = start; index < operation.steps.length; index++) {
      const step = operation.steps[index];
      const expected = index === 0 ? 'started' : operation.steps[index - 1].name;
      const last = index === operation.steps.length - 1;
      const result =
        step.kind === 'local'
          ? await this.runLocal(operation, step, expected, bound.input, target, last)
          : await this.runForeign(operation, step, expected, bound.input, state, target, last);
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
   * original), as for a claim. The step rolled back and the key is released by the caller, so
   * a retry resumes at the same recovery point. A foreign step's own errors never come here.
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
    target: OperationRunTarget,
    last: boolean,
  ): Promise<StepRunResult> {
    // The step reads the carried state under the row lock, as the record holds it.
    const isolation = step.options.isolation ?? 'READ COMMITTED';
    const attempts = this.options.phases.localStepAttempts;
    for (let attempt = 1; ; attempt++) {
      const tx = await this.phases
        .beginStep(target.ref, expected, isolation)
        .catch((error: unknown) => this.failClosed(error, `step "${step.name}"`));
      if (!tx) return this.lost(target);
      try {
        // A step that outlives the lease must not keep the record locked (a retry would wait
        // on the lock instead of taking over) nor commit afterwards.
        const outcome = await untilAborted(
          step.run({
            ...this.context(input, tx.state, target),
            manager: tx.manager,
            stage: this.stager(tx, target, step.name),
          }),
          target.lease.signal,
        );
        if (target.lease.signal.aborted) {
          await tx.tx.abandon();
          return this.lost(target);
        }
        const result = await this.settle(operation, step, expected, outcome, tx.state, target, {
          last,
          tx,
        });
        // A finished step committed in settle(), before this instance learnt of it.
        if (result.kind === 'proceeded') await tx.tx.commit();
        else if (result.kind !== 'completed') await tx.tx.rollback();
        if (result.kind === 'released') return this.release(target, result.reason);
        if (result.kind === 'lost') this.localFirst?.settledElsewhere(target.ref);
        return result;
      } catch (error) {
        if (target.lease.signal.aborted) {
          await tx.tx.abandon().catch(() => undefined);
          return this.lost(target);
        }
        await tx.tx.rollback().catch(() => undefined);
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
    target: OperationRunTarget,
    last: boolean,
  ): Promise<StepRunResult> {
    const { timeoutSeconds } = step.options;
    const needMs = (timeoutSeconds + this.options.phases.foreignStepMarginSeconds) * 1000;
    if (!(await target.lease.ensureRemaining(needMs))) {
      if (target.lease.signal.aborted) return this.lost(target);
      throw IdempotencyProblemException.operationUnavailable(
        `Foreign step "${step.name}" of "${operation.name}" needs ${needMs / 1000} s of lease ` +
          '(its timeoutSeconds plus phases.foreignStepMarginSeconds), more than lockTimeoutSeconds.',
      );
    }
    const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
    const signal = AbortSignal.any([target.lease.signal, timeout]);
    let outcome: StepOutcome;
    try {
      outcome = await untilAborted(
        step.run({ ...this.context(input, state, target), signal }),
        signal,
      );
    } catch (error) {
      if (target.lease.signal.aborted) return this.lost(target);
      if (timeout.aborted) {
        return this.release(target, `foreign step "${step.name}" ran past ${timeoutSeconds} s`);
      }
      throw error;
    }
    if (target.lease.signal.aborted) return this.lost(target);
    const result = await this.settle(operation, step, expected, outcome, state, target, {
      last,
    }).catch((error: unknown) => this.failClosed(error, `step "${step.name}"`));
    if (result.kind === 'released') return this.release(target, result.reason);
    return result.kind === 'lost' ? this.lost(target) : result;
  }

  /** This run no longer owns the record: this instance stops answering 409 for it. */
  private lost(target: OperationRunTarget): StepRunResult {
    this.localFirst?.settledElsewhere(target.ref);
    return { kind: 'lost' };
  }

  private get localFirst(): LocalFirstIdempotencyStore | undefined {
    return this.store instanceof LocalFirstIdempotencyStore ? this.store : undefined;
  }

  /** Records a step's outcome: moves the record on, or finishes it; in `tx` when given. */
  private async settle(
    operation: RegisteredOperation,
    step: OperationStep,
    expected: string,
    outcome: StepOutcome,
    carried: Record<string, unknown>,
    target: OperationRunTarget,
    { last, tx }: { last: boolean; tx?: StepTransaction },
  ): Promise<StepRunResult> {
    switch (outcome?.kind) {
      case 'proceed': {
        if (last) {
          throw IdempotencyProblemException.operationUnavailable(
            `The last step of "${operation.name}" ("${step.name}") must respond, not proceed.`,
          );
        }
        const state = { ...carried, ...outcome.state };
        const moved = await this.phases.advance(target.ref, expected, step.name, state, tx?.tx);
        if (!moved) return { kind: 'lost' };
        return { kind: 'proceeded', state };
      }
      case 'respond': {
        const { stored, outgoing } = this.render(outcome, target.replayHeaders);
        // The heartbeat would find the finished record no longer in flight and report a loss.
        target.lease.stop();
        const sentAt = this.localFirst?.clock();
        const done = await this.phases.finish(
          target.ref,
          expected,
          carried,
          stored,
          target.ttlSeconds,
          tx?.tx,
        );
        if (!done) return { kind: 'lost' };
        if (tx) await tx.tx.commit();
        this.localFirst?.settledElsewhere(target.ref, {
          response: stored,
          ttlSeconds: target.ttlSeconds,
          sentAt: sentAt!,
        });
        this.events.emit({
          type: 'operation_finished',
          scope: target.ref.scope,
          key: target.ref.key,
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

  private async release(target: OperationRunTarget, reason: string): Promise<StepRunResult> {
    target.lease.stop();
    if (!(await this.store.release(target.ref, 'retry'))) return { kind: 'lost' };
    this.events.emit({
      type: 'released',
      scope: target.ref.scope,
      key: target.ref.key,
      reason: 'retry_later',
    });
    return { kind: 'released', reason };
  }

  private context(input: unknown, state: Record<string, unknown>, target: OperationRunTarget) {
    return {
      input,
      state,
      identity: target.identity,
      derivedKey: (label: string) => deriveKey(target.identity.recordId, label),
    };
  }

  private stager(tx: StepTransaction, target: OperationRunTarget, stepName: string) {
    let staged = 0;
    return async (name: string, args: unknown): Promise<string> => {
      // Stable across retries of the step: the record, the step and the job's place in it.
      const key = createHash('sha256')
        .update(`${target.identity.recordId}\u0000${stepName}\u0000${staged++}\u0000${name}`)
        .digest('hex');
      await this.jobs.stage(tx.tx, {
        name,
        args,
        key,
        originScope: target.ref.scope,
        originKey: target.ref.key,
      });
      return key;
    };
  }

  private render(
    outcome: Extract<StepOutcome, { kind: 'respond' }>,
    replayHeaders: readonly string[],
  ): { stored: StoredResponse; outgoing: StoredResponse } {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(outcome.headers)) {
      headers[name.toLowerCase()] = String(value);
    }
    const bytes = responseBytes(outcome.body, headers['content-type'], 'text/plain');
    if (!bytes) {
      throw IdempotencyProblemException.operationUnavailable(
        'respond() needs a body that can be sent as bytes: JSON, a string or a Buffer.',
      );
    }
    if (bytes.contentType) headers['content-type'] = bytes.contentType;
    const kept: Record<string, string> = {};
    for (const name of replayHeaders) if (headers[name] !== undefined) kept[name] = headers[name];
    return {
      stored: { status: outcome.status, headers: kept, body: bytes.body },
      outgoing: { status: outcome.status, headers, body: bytes.body },
    };
  }

  private emitAbandoned(
    ref: IdempotencyRecordRef,
    operation: string,
    recoveryPoint: string | null,
    reason: 'max_age' | 'expired',
  ): void {
    this.events.emit({
      type: 'operation_abandoned',
      scope: ref.scope,
      key: ref.key,
      operation,
      recoveryPoint,
      reason,
    });
  }
}

/**
 * The step's promise, or a rejection with the signal's reason as soon as it aborts (the step
 * goes on in the background; what it produces is ignored).
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** A step's result inside the runner. */
type StepRunResult = OperationRunResult | { kind: 'proceeded'; state: Record<string, unknown> };
