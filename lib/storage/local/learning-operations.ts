import type {
  IdempotencyRecordRef,
  StoredResponse,
} from '../../interfaces/idempotency-record.interface';
import type {
  OperationRecordStore,
  OperationStepTransaction,
} from '../../phases/operation-record.store';

/** What the local-first store learns from an operation's writes. */
export interface OperationWritesListener {
  /** Its clock, read just before a completion is sent. */
  now(): number;
  /** The owner's record was completed, replayed until `expiresAt` (the listener's clock). */
  completed(ref: IdempotencyRecordRef, response: StoredResponse, expiresAt: number): void;
  /** The owner's run ended: released by a commit, abandoned, or lost to another owner. */
  ended(ref: IdempotencyRecordRef): void;
}

/** A step transaction that reports its record's completion once it commits. */
class LearningStep implements OperationStepTransaction {
  /** Set by a `finish()` in this step: reported on commit. */
  completion?: { ref: IdempotencyRecordRef; response: StoredResponse; expiresAt: number };

  constructor(
    readonly inner: OperationStepTransaction,
    private readonly listener: OperationWritesListener,
  ) {}

  get manager() {
    return this.inner.manager;
  }

  get state() {
    return this.inner.state;
  }

  stage(job: Parameters<OperationStepTransaction['stage']>[0]): Promise<void> {
    return this.inner.stage(job);
  }

  async commit(): Promise<void> {
    await this.inner.commit();
    const done = this.completion;
    if (!done) return;
    this.listener.completed(done.ref, done.response, done.expiresAt);
    this.listener.ended(done.ref);
  }

  rollback(): Promise<void> {
    return this.inner.rollback();
  }

  abandon(): Promise<void> {
    return this.inner.abandon();
  }
}

/**
 * The operations ability of a wrapped store, with every owner-guarded write reported to the
 * local-first store: a completion is remembered for replays, and a run that ended (a write that
 * found the record no longer owned, an abandonment) stops answering 409 from this instance.
 * Writes themselves go to the wrapped store unchanged.
 * @param inner - the wrapped store's operations ability
 * @param listener - the local-first store
 */
export function learningOperations(
  inner: OperationRecordStore,
  listener: OperationWritesListener,
): OperationRecordStore {
  const unwrap = (step?: OperationStepTransaction) => (step as LearningStep | undefined)?.inner;
  const endUnless = <T>(ref: IdempotencyRecordRef, owned: T): T => {
    if (!owned) listener.ended(ref);
    return owned;
  };
  return {
    bind: async (ref, operation, input, settings) =>
      endUnless(ref, await inner.bind(ref, operation, input, settings)),
    beginStep: async (ref, expectedPoint, isolation) => {
      const step = endUnless(ref, await inner.beginStep(ref, expectedPoint, isolation));
      return step && new LearningStep(step, listener);
    },
    advance: async (ref, expectedPoint, nextPoint, state, step) =>
      endUnless(ref, await inner.advance(ref, expectedPoint, nextPoint, state, unwrap(step))),
    finish: async (ref, expectedPoint, state, response, ttlSeconds, step) => {
      const sentAt = listener.now();
      const done = await inner.finish(
        ref,
        expectedPoint,
        state,
        response,
        ttlSeconds,
        unwrap(step),
      );
      if (!done) return endUnless(ref, done);
      const expiresAt = sentAt + ttlSeconds * 1000;
      if (step) {
        (step as LearningStep).completion = { ref, response, expiresAt };
      } else {
        listener.completed(ref, response, expiresAt);
        listener.ended(ref);
      }
      return true;
    },
    abandon: async (ref) => {
      try {
        return await inner.abandon(ref);
      } finally {
        listener.ended(ref);
      }
    },
    takeOver: (...args) => inner.takeOver(...args),
    abandonOld: (...args) => inner.abandonOld(...args),
    reapExpired: (...args) => inner.reapExpired(...args),
    deleteAbandoned: (...args) => inner.deleteAbandoned(...args),
    listAbandoned: (...args) => inner.listAbandoned(...args),
    abandonedSettings: (...args) => inner.abandonedSettings(...args),
    resolveAbandoned: (...args) => inner.resolveAbandoned(...args),
  };
}
