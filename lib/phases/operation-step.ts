import type { EntityManager } from 'typeorm';
import type { IdempotencyRequestIdentity } from '../context/idempotency-identity';

/** What every step of an operation can read. */
export interface OperationStepContext<Input, State> {
  /** The operation's input, as stored on the record when the operation first ran. */
  readonly input: Input;
  /** The state carried so far: every earlier step's `proceed(...)` merged, reloaded on resume. */
  readonly state: State;
  /** The record's identity; `attempt` counts claims and takeovers (a completer run included). */
  readonly identity: IdempotencyRequestIdentity;
  /**
   * A key for a foreign call, derived from the record: the same on every retry, owner and
   * completer run of this (scope, key), different for every other (scope, key) and label.
   * @param label - names the foreign call, e.g. `'charge'`
   * @returns 64 hex characters
   */
  derivedKey(label: string): string;
}

/** What a local step can do besides reading: write through one short transaction. */
export interface LocalStepContext<Input, State> extends OperationStepContext<Input, State> {
  /**
   * The step's transaction. Writes made through it commit together with the move to the next
   * recovery point, or not at all.
   */
  readonly manager: EntityManager;
  /**
   * Stages a job in the step's transaction: the job exists exactly when the step committed.
   * The drainer delivers it, at least once, to the `@IdempotencyJobHandler(name)` provider.
   * @param name - the job handler's name
   * @param args - JSON-serialisable arguments
   * @returns the job's stable key (also given to its handler)
   */
  stage(name: string, args: unknown): Promise<string>;
}

/** What a foreign step gets: no transaction, and a signal that fires when the lease is lost. */
export interface ForeignStepContext<Input, State> extends OperationStepContext<Input, State> {
  /**
   * Aborted when this run lost its lease (another owner took the key over) or the step ran past
   * its `timeoutSeconds`. Pass it to `fetch` or the provider's SDK.
   */
  readonly signal: AbortSignal;
}

/** A step's verdict: go on, answer for good, or give the key back for a later retry. */
export type StepOutcome =
  | { readonly kind: 'proceed'; readonly state: Record<string, unknown> }
  | {
      readonly kind: 'respond';
      readonly status: number;
      readonly body: unknown;
      readonly headers: Readonly<Record<string, string>>;
    }
  | { readonly kind: 'retry_later'; readonly reason: string };

/**
 * Go on to the next step.
 * @param state - JSON-serialisable values merged into the carried state (shallow)
 */
export function proceed(state: Record<string, unknown> = {}): StepOutcome {
  return { kind: 'proceed', state };
}

/**
 * Answer the request for good: the response is stored with the record's move to `finished`, in
 * the same commit, and replayed to every retry. The body is sent as JSON (a string or Buffer
 * body as it is).
 * @param status - a final status (2xx, 3xx, deterministic 4xx such as 402)
 * @param body - the response body
 * @param headers - response headers; those in `replayHeaders` are stored and replayed
 */
export function respond(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): StepOutcome {
  return { kind: 'respond', status, body, headers };
}

/**
 * Not now: nothing is stored, the key is released at the current recovery point, and the client
 * gets 503 with `Retry-After`. A retry (or the completer) resumes from that point.
 * @param reason - logged and put in the problem's detail
 */
export function retryLater(reason = 'a step asked to be retried later'): StepOutcome {
  return { kind: 'retry_later', reason };
}

/** Options of a local step. */
export interface LocalStepOptions {
  /**
   * Isolation level of the step's transaction.
   * @defaultValue 'READ COMMITTED'
   */
  isolation?: 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';
}

/** Options of a foreign step. */
export interface ForeignStepOptions {
  /**
   * The longest the foreign call may take. The step does not start when the remaining lease is
   * shorter than this plus `phases.foreignStepMarginSeconds` (the lease is renewed first); when
   * it runs past it, its signal is aborted and the key released (503, retried later).
   */
  timeoutSeconds: number;
}

/** One step of an operation; build it with `localStep()` or `foreignStep()`. */
export type OperationStep<Input = any, State = any> =
  | {
      readonly kind: 'local';
      /** The recovery point the record moves to when the step proceeds. */
      readonly name: string;
      readonly options: LocalStepOptions;
      readonly run: (context: LocalStepContext<Input, State>) => Promise<StepOutcome>;
    }
  | {
      readonly kind: 'foreign';
      readonly name: string;
      readonly options: ForeignStepOptions;
      readonly run: (context: ForeignStepContext<Input, State>) => Promise<StepOutcome>;
    };

/**
 * A local step: one short transaction that re-checks ownership and the recovery point, runs
 * `run`'s writes through `context.manager`, and moves the record on in the same commit.
 * Serialization failures and deadlocks retry the step alone.
 * @param name - the recovery point reached when it proceeds
 * @param run - the step's work
 * @param options - isolation level
 */
export function localStep<Input = any, State = any>(
  name: string,
  run: (context: LocalStepContext<Input, State>) => Promise<StepOutcome>,
  options: LocalStepOptions = {},
): OperationStep<Input, State> {
  return { kind: 'local', name, options, run };
}

/**
 * A foreign step: a call outside any transaction (a payment provider), with a derived key and a
 * signal. Its outcome is recorded by a short transaction right after it returns; a crash
 * before that runs the call again with the same derived key.
 * @param name - the recovery point reached when it proceeds
 * @param options - its timeout
 * @param run - the call
 */
export function foreignStep<Input = any, State = any>(
  name: string,
  options: ForeignStepOptions,
  run: (context: ForeignStepContext<Input, State>) => Promise<StepOutcome>,
): OperationStep<Input, State> {
  return { kind: 'foreign', name, options, run };
}

/**
 * An operation in phases, declared as a provider class with `@IdempotentOperation(name)`.
 * Recovery points: `started` → one per step (its name) → `finished`. The last step must
 * respond.
 *
 * @example
 * \@IdempotentOperation('payments.create')
 * export class CreatePayment implements IdempotencyOperation<CreatePaymentDto> {
 *   readonly steps = [
 *     localStep('payment_created', async ({ manager, input }) => proceed({ paymentId: await insertPending(manager, input) })),
 *     foreignStep('charged', { timeoutSeconds: 10 }, async ({ derivedKey, signal }) => proceed({ chargeId: (await charge(derivedKey('charge'), signal)).id })),
 *     localStep('succeeded', async ({ manager, state, stage }) => { await markSucceeded(manager, state); await stage('send_receipt', state); return respond(201, state); }),
 *   ];
 * }
 */
export interface IdempotencyOperation<Input = any, State = any> {
  /** The steps, in order. Step names are recovery points: unique, not `started`/`finished`. */
  readonly steps: ReadonlyArray<OperationStep<Input, State>>;
}
