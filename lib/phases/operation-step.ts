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
   * The drainer delivers it, at least once, to the `@IdempotentJobHandler(name)` provider.
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

/**
 * A step's verdict: go on, answer for good, or give the key back for a later retry. `Output` is
 * the body a `respond()` gives and `State` what a `proceed()` carries, so a step's outcome is
 * checked against its operation's types where the step returns it.
 */
export type StepOutcome<Output = unknown, State = Record<string, unknown>> =
  /** Go on to the next step (`proceed()`). */
  | {
      /** Which verdict this is. */
      readonly kind: 'proceed';
      /** Values merged into the carried state. */
      readonly state: State;
    }
  /** Answer for good (`respond()`). */
  | {
      /** Which verdict this is. */
      readonly kind: 'respond';
      /** The final status. */
      readonly status: number;
      /** The response body. */
      readonly body: Output;
      /** Response headers; those in `replayHeaders` are stored and replayed. */
      readonly headers: Readonly<Record<string, string>>;
    }
  /** Give the key back for a later retry (`retryLater()`). */
  | {
      /** Which verdict this is. */
      readonly kind: 'retry_later';
      /** Logged and put in the problem's detail. */
      readonly reason: string;
    };

/**
 * Go on to the next step.
 * @param state - JSON-serialisable values merged into the carried state (shallow); in a step of
 *   `defineSteps<Input, State>()` they must be some of `State`'s
 */
export function proceed<State extends object = Record<never, never>>(
  state: State = {} as State,
): StepOutcome<never, State> {
  return { kind: 'proceed', state };
}

/**
 * Answer the request for good: the response is stored with the record's move to `finished`, in
 * the same commit, and replayed to every retry. The body is sent as JSON (a string or Buffer
 * body as it is).
 * @param status - a final status (2xx, 3xx, deterministic 4xx such as 402)
 * @param body - the response body; in a step of `defineSteps<Input, State, Output>()` it must be
 *   an `Output`, which is what `IdempotencyOperations.run()` returns
 * @param headers - response headers; those in `replayHeaders` are stored and replayed
 */
export function respond<Body>(
  status: number,
  body: Body,
  headers: Record<string, string> = {},
): StepOutcome<Body, never> {
  return { kind: 'respond', status, body, headers };
}

/**
 * Not now: nothing is stored, the key is released at the current recovery point, and the client
 * gets 503 with `Retry-After`. A retry (or the completer) resumes from that point.
 * @param reason - logged and put in the problem's detail
 */
export function retryLater(reason = 'a step asked to be retried later'): StepOutcome<never, never> {
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
   * shorter than this plus `foreignStepMarginSeconds` (the lease is renewed first); when
   * it runs past it, its signal is aborted and the key released (503, retried later).
   */
  timeoutSeconds: number;
}

/**
 * One step of an operation, as the runner reads it; build it with `defineSteps()`'s `step`.
 * `Input` and `State` are what it reads, `Output` the body it may respond with.
 */
export type OperationStep<Input = any, State = any, Output = unknown> =
  /** A local step (`step.local()`): one short transaction. */
  | {
      /** Which kind of step this is. */
      readonly kind: 'local';
      /** The recovery point the record moves to when the step proceeds. */
      readonly name: string;
      /** Its transaction's isolation level. */
      readonly options: LocalStepOptions;
      /** The step's work. */
      readonly run: (
        context: LocalStepContext<Input, State>,
      ) => Promise<StepOutcome<Output, Partial<State>>>;
    }
  /** A foreign step (`step.foreign()`): a call outside any transaction. */
  | {
      /** Which kind of step this is. */
      readonly kind: 'foreign';
      /** The recovery point the record moves to when the step proceeds. */
      readonly name: string;
      /** Its timeout. */
      readonly options: ForeignStepOptions;
      /** The call. */
      readonly run: (
        context: ForeignStepContext<Input, State>,
      ) => Promise<StepOutcome<Output, Partial<State>>>;
    };

/**
 * The `step` that `defineSteps()` hands its callback: it builds steps whose context is already
 * typed with the operation's `Input` and `State`, and whose `respond()` bodies must be `Output`s,
 * so no step repeats the operation's types.
 */
export interface OperationStepFactory<Input, State, Output> {
  /**
   * A local step: one short transaction that re-checks ownership and the recovery point, runs
   * `run`'s writes through `context.manager`, and moves the record on in the same commit.
   * Serialization failures and deadlocks retry the step alone.
   * @param name - the recovery point reached when it proceeds
   * @param run - the step's work
   * @param options - isolation level
   */
  local(
    name: string,
    run: (context: LocalStepContext<Input, State>) => Promise<StepOutcome<Output, Partial<State>>>,
    options?: LocalStepOptions,
  ): OperationStep<Input, State, Output>;
  /**
   * A foreign step: a call outside any transaction (a payment provider), with a derived key and
   * a signal. Its outcome is recorded by a short transaction right after it returns; a crash
   * before that runs the call again with the same derived key.
   * @param name - the recovery point reached when it proceeds
   * @param options - its timeout
   * @param run - the call
   */
  foreign(
    name: string,
    options: ForeignStepOptions,
    run: (
      context: ForeignStepContext<Input, State>,
    ) => Promise<StepOutcome<Output, Partial<State>>>,
  ): OperationStep<Input, State, Output>;
}

const STEP_FACTORY: OperationStepFactory<any, any, unknown> = {
  local: (name, run, options = {}) => ({ kind: 'local', name, options, run }),
  foreign: (name, options, run) => ({ kind: 'foreign', name, options, run }),
};

/**
 * Declares an operation's steps with its types given once: `Input` (what `run()` takes and
 * every step reads), `State` (what steps carry with `proceed()`) and `Output` (the body of the
 * final `respond()`, which `IdempotencyOperations.run()` returns). Every step built with `step`
 * is checked against them, so a step neither repeats them nor can drift from them.
 * @param build - returns the steps, in order, built with `step.local()` and `step.foreign()`
 * @returns the steps, for the operation's `steps` property
 *
 * @example
 * readonly steps = defineSteps<CreatePaymentDto, { paymentId: string; chargeId?: string }, Payment>((step) => [
 *   step.local('payment_created', async ({ manager, input }) => proceed({ paymentId: await insertPending(manager, input) })),
 *   step.foreign('charged', { timeoutSeconds: 10 }, async ({ derivedKey, signal }) => proceed({ chargeId: (await charge(derivedKey('charge'), signal)).id })),
 *   step.local('succeeded', async ({ manager, state }) => respond(201, await markSucceeded(manager, state))),
 * ]);
 */
export function defineSteps<Input, State extends object, Output = unknown>(
  build: (
    step: OperationStepFactory<Input, State, Output>,
  ) => ReadonlyArray<OperationStep<Input, State, Output>>,
): ReadonlyArray<OperationStep<Input, State, Output>> {
  return build(STEP_FACTORY as OperationStepFactory<Input, State, Output>);
}

/**
 * An operation in phases, declared as a provider class with `@IdempotentOperation(name)` whose
 * `steps` come from `defineSteps()`. Recovery points: `started` → one per step (its name) →
 * `finished`. The last step must respond.
 *
 * @example
 * \@IdempotentOperation('payments.create')
 * export class CreatePayment {
 *   readonly steps = defineSteps<CreatePaymentDto, PaymentState, Payment>((step) => [
 *     step.local('payment_created', async ({ manager, input }) => proceed({ paymentId: await insertPending(manager, input) })),
 *     step.local('succeeded', async ({ manager, state, stage }) => { await stage('send_receipt', state); return respond(201, await markSucceeded(manager, state)); }),
 *   ]);
 * }
 */
export interface IdempotencyOperation<Input = any, State = any, Output = unknown> {
  /** The steps, in order. Step names are recovery points: unique, not `started`/`finished`. */
  readonly steps: ReadonlyArray<OperationStep<Input, State, Output>>;
}

/** What an operation takes: the `Input` of its `defineSteps()`, given to `run()`. */
export type OperationInput<Operation extends IdempotencyOperation> =
  Operation extends IdempotencyOperation<infer Input, any, any> ? Input : never;

/** What an operation answers with: the `Output` of its `defineSteps()`, returned by `run()`. */
export type OperationOutput<Operation extends IdempotencyOperation> =
  Operation extends IdempotencyOperation<any, any, infer Output> ? Output : never;
