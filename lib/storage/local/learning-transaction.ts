import type {
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../../interfaces/idempotency-record.interface';

/** What the local-first store does around a transaction's completion. */
export interface TransactionWritesListener {
  /** Its clock, read just before a completion is sent. */
  now(): number;
  /** The completion as the wrapped store is to keep it (sealed when encryption is on). */
  seal(ref: IdempotencyRecordRef, response: StoredResponse): StoredResponse;
  /** The completion committed: the record is replayed until `expiresAt` (the listener's clock). */
  committed(ref: IdempotencyRecordRef, response: StoredResponse, expiresAt: number): void;
  /** The completion did not commit, or committed unconfirmed: rethrows `error`. */
  notCommitted(ref: IdempotencyRecordRef | undefined, error: unknown): never;
}

/**
 * A wrapped store's transaction whose completion is sealed on its way down and reported to the
 * local-first store once the transaction commits, with an expiry measured from before its
 * `complete()` was sent.
 * @param transaction - the wrapped store's transaction
 * @param listener - the local-first store
 */
export function learningTransaction(
  transaction: IdempotencyStoreTransaction,
  listener: TransactionWritesListener,
): IdempotencyStoreTransaction {
  let completed: { ref: IdempotencyRecordRef; response: StoredResponse; expiresAt: number };
  const completeAndCommit = transaction.completeAndCommit?.bind(transaction);
  return {
    manager: transaction.manager,
    complete: (ref, response, ttlSeconds) => {
      const sentAt = listener.now();
      return transaction.complete(ref, listener.seal(ref, response), ttlSeconds).then((owned) => {
        if (owned) completed = { ref, response, expiresAt: sentAt + ttlSeconds * 1000 };
        return owned;
      });
    },
    commit: () =>
      transaction.commit().then(
        () => {
          if (completed) listener.committed(completed.ref, completed.response, completed.expiresAt);
        },
        (error: unknown) => listener.notCommitted(completed?.ref, error),
      ),
    rollback: () => transaction.rollback(),
    completeAndCommit:
      completeAndCommit &&
      ((ref, response, ttlSeconds) => {
        const sentAt = listener.now();
        return completeAndCommit(ref, listener.seal(ref, response), ttlSeconds).then(
          (owned) => {
            if (owned) listener.committed(ref, response, sentAt + ttlSeconds * 1000);
            return owned;
          },
          (error: unknown) => listener.notCommitted(ref, error),
        );
      }),
  };
}
