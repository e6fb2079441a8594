import type {
  IdempotencyRecordRef,
  StoredResponse,
} from '../../interfaces/idempotency-record.interface';
import type {
  OperationRecordRow,
  OperationRecordStore,
  OperationStepTransaction,
} from '../../phases/operation-record.store';
import { overriding } from '../overriding';
import { rejectOnThrow } from '../../utils/reject-on-throw';

/** What the local-first store learns from an operation's writes. */
export interface OperationWritesListener {
  /** Its clock, read just before a completion is sent. */
  now(): number;
  /** The owner's record was completed, replayed until `expiresAt` (the listener's clock). */
  completed(ref: IdempotencyRecordRef, response: StoredResponse, expiresAt: number): void;
  /** The owner's run ended: released by a commit, abandoned, or lost to another owner. */
  ended(ref: IdempotencyRecordRef): void;
  /** The completer took these records over: runs of this instance from now on. */
  taken(rows: readonly OperationRecordRow[]): void;
}

/** A step whose completion, written by a `finish()` in it, is reported once it commits. */
interface LearningStep extends OperationStepTransaction {
  completion?: () => void;
}

/**
 * The operations ability of a wrapped store, with every owner-guarded write reported to the
 * local-first store: a completion is remembered for replays, a run that ended (a write that
 * found the record no longer owned, an abandonment) stops answering 409 from this instance, and
 * the records the completer takes over are known as this instance's runs.
 * Writes themselves go to the wrapped store unchanged. A completion written in a step's
 * transaction is reported once that step commits.
 * @param inner - the wrapped store's operations ability
 * @param listener - the local-first store
 */
export function learningOperations(
  inner: OperationRecordStore,
  listener: OperationWritesListener,
): OperationRecordStore {
  const endUnless = <T>(ref: IdempotencyRecordRef, owned: T): T => {
    if (!owned) listener.ended(ref);
    return owned;
  };
  return overriding(inner, {
    bind: async (ref, operation, input, settings) =>
      endUnless(ref, await inner.bind(ref, operation, input, settings)),
    beginStep: async (ref, expectedPoint, isolation) => {
      const step = endUnless(ref, await inner.beginStep(ref, expectedPoint, isolation));
      if (!step) return step;
      const learning: LearningStep = overriding<LearningStep>(step, {
        commit: () => rejectOnThrow(() => step.commit()).then(() => learning.completion?.()),
      });
      return learning;
    },
    advance: async (ref, expectedPoint, nextPoint, state, step) =>
      endUnless(ref, await inner.advance(ref, expectedPoint, nextPoint, state, step)),
    finish: async (ref, expectedPoint, state, response, ttlSeconds, step) => {
      const sentAt = listener.now();
      const done = await inner.finish(ref, expectedPoint, state, response, ttlSeconds, step);
      if (!done) return endUnless(ref, done);
      const expiresAt = sentAt + ttlSeconds * 1000;
      const report = () => {
        listener.completed(ref, response, expiresAt);
        listener.ended(ref);
      };
      if (step) (step as LearningStep).completion = report;
      else report();
      return true;
    },
    takeOver: async (batchSize, afterSeconds, maxAgeSeconds, lockTimeoutSeconds) => {
      const rows = await inner.takeOver(batchSize, afterSeconds, maxAgeSeconds, lockTimeoutSeconds);
      listener.taken(rows);
      return rows;
    },
    abandon: (ref) => rejectOnThrow(() => inner.abandon(ref)).finally(() => listener.ended(ref)),
  });
}
