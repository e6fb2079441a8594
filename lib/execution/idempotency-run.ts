import type { IdempotencyRequestIdentity } from '../context/idempotency-identity';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type {
  IdempotencyRecordRef,
  IdempotencyRunSettings,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';
import { LeaseHeartbeat } from './lease-heartbeat';

/**
 * How a run's record gets its final response:
 * - `response`: the handler's response is stored by the plain completion;
 * - `transaction`: it is stored inside the handler's own transaction, which then commits;
 * - `operation`: an operation in phases stores it with its last step, and nothing else may.
 */
export type IdempotencyRunCompletion = 'response' | 'transaction' | 'operation';

/** How an operation in phases ended its run. */
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

/**
 * What the run's operation came to: its result, or `failed` when it threw before concluding
 * (the record then stands at its recovery point, still owned by this run).
 */
export type OperationConclusion = OperationRunResult | { kind: 'failed'; error: unknown };

/** What starting a run needs: the claimed record, its lease settings and who hears of a loss. */
export interface IdempotencyRunStart {
  store: IdempotencyStore;
  ref: IdempotencyRecordRef;
  identity: IdempotencyRequestIdentity;
  settings: IdempotencyRunSettings;
  completion: IdempotencyRunCompletion;
  lockTimeoutSeconds: number;
  maxLockHoldSeconds: number;
  /** `Date.now()` when the claim (or takeover) was sent: the lease is counted from there. */
  claimedAt: number;
  /** Told once when a renewal finds the record taken over. */
  onLost: () => void;
  /** Told of each renewal that failed (the store was unreachable). */
  onError: (error: unknown) => void;
}

/**
 * One claimed record's run: its ref, identity, lease and settings, and how it is completed.
 * A request, a retry and the completer all begin one with `IdempotencyRun.begin()`. The
 * completion is fixed when the run begins, with one hand-over: an operation in phases takes a
 * `response` run over, once, before its first write (`operate()`); from then on only the
 * operation's own last step completes the record (the plain completion refuses a record whose
 * operation is unfinished, in SQL too).
 */
export class IdempotencyRun {
  private completionMode: IdempotencyRunCompletion;
  private operation?: Promise<OperationConclusion>;

  private constructor(
    readonly ref: IdempotencyRecordRef,
    readonly identity: IdempotencyRequestIdentity,
    readonly lease: LeaseHeartbeat,
    readonly settings: IdempotencyRunSettings,
    completion: IdempotencyRunCompletion,
  ) {
    this.completionMode = completion;
  }

  /**
   * Begins a run on a record just claimed or taken over: its lease is renewed from now on.
   * @param start - the record, its settings and completion, the lease's bounds
   */
  static begin(start: IdempotencyRunStart): IdempotencyRun {
    const { store, ref, onLost, onError } = start;
    const { lockTimeoutSeconds: lock, maxLockHoldSeconds: hold } = start;
    const lease = new LeaseHeartbeat(store, ref, lock, hold, onLost, onError);
    lease.start(start.claimedAt);
    return new IdempotencyRun(ref, start.identity, lease, start.settings, start.completion);
  }

  /** How this run's record is completed. */
  get completion(): IdempotencyRunCompletion {
    return this.completionMode;
  }

  /**
   * Runs the record's operation in phases as this run's completion. Allowed once per run, on a
   * run begun for an operation or one that stores the handler's response (a transactional
   * route's single transaction cannot hold an operation's several commits).
   * @param work - the operation's run
   * @returns what `work` returned
   * @throws IdempotencyProblemException 500 `idempotency_operation_unavailable` when the run
   *   cannot hand its completion over; what `work` threw
   */
  operate(work: () => Promise<OperationRunResult>): Promise<OperationRunResult> {
    if (this.completionMode === 'transaction') {
      throw IdempotencyProblemException.operationUnavailable(
        'Operations in phases run their own short transactions: use @Idempotent() without ' +
          'transactional: true on this route.',
      );
    }
    if (this.operation) {
      throw IdempotencyProblemException.operationUnavailable(
        'One request runs one operation: IdempotencyOperations.run() was called twice.',
      );
    }
    this.completionMode = 'operation';
    const running = work();
    this.operation = running.then(
      (result): OperationConclusion => result,
      (error: unknown): OperationConclusion => ({ kind: 'failed', error }),
    );
    return running;
  }

  /**
   * What the operation came to, once it settles; undefined when none was run.
   */
  operationConclusion(): Promise<OperationConclusion> | undefined {
    return this.operation;
  }
}
