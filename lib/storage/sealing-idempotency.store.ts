import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import { IdempotencyStore } from './idempotency.store';
import type { IdempotencyStoreCapabilities } from './idempotency-store.capabilities';
import type { RecordSealer } from './sealed/record-sealer';
import { sealingOperations } from './sealed/sealing-operations';
import { overriding } from './overriding';

/**
 * Encryption at rest (the `encryption` option), as a store between the local-first store and
 * the store that decides: every response it is given to store is sealed with the first key
 * (headers, body and status together; the status is also kept in the clear for the store), and
 * every response a claim finds is opened with the key it names, so the layers above — the
 * replay cache included — only ever see what the seal vouches for. Operation input, carried
 * state and final responses are sealed the same way through its operations ability. With
 * encryption on, a record stored in the clear is read only until `encryption.plaintextUntil`.
 *
 * A completed record that cannot be opened (its key is not configured, its bytes do not
 * authenticate, its status or headers in the row differ from the seal's, or it is in the clear
 * when it may not be) makes the claim throw `idempotency_record_unreadable` (500): it is
 * neither replayed nor run again. The module always puts this store in place, with no keys when
 * encryption is off, so a sealed record is never replayed as ciphertext.
 */
export class SealingIdempotencyStore extends IdempotencyStore {
  private abilities?: IdempotencyStoreCapabilities;

  /**
   * @param inner - the store that decides
   * @param sealer - seals with the first key, opens with any
   */
  constructor(
    readonly inner: IdempotencyStore,
    private readonly sealer: RecordSealer,
  ) {
    super();
  }

  /** @inheritDoc */
  claim(request: ClaimRequest): Promise<ClaimResult> {
    return this.inner.claim(request).then((result) => {
      if (result.outcome !== 'completed') return result;
      const { scope, key } = request;
      const what = `The record ${result.recordId}`;
      const response = this.sealer.openResponse(scope, key, result.response, what);
      return response === result.response ? result : { ...result, response };
    });
  }

  /** @inheritDoc */
  complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean> {
    return this.inner.complete(ref, this.seal(ref, response), ttlSeconds);
  }

  /** @inheritDoc */
  release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean> {
    return this.inner.release(ref, mode);
  }

  /** @inheritDoc */
  renew(ref: IdempotencyRecordRef, lockTimeoutSeconds: number): Promise<boolean> {
    return this.inner.renew(ref, lockTimeoutSeconds);
  }

  /** @inheritDoc */
  purgeExpired(batchSize: number): Promise<number> {
    return this.inner.purgeExpired(batchSize);
  }

  /** The transaction's completion is sealed like `complete()`'s. @inheritDoc */
  beginTransaction(): Promise<IdempotencyStoreTransaction> {
    const begun = this.inner.beginTransaction();
    if (!this.sealer.seals) return begun;
    return begun.then((transaction) =>
      overriding(transaction, {
        complete: (ref, response, ttlSeconds) =>
          transaction.complete(ref, this.seal(ref, response), ttlSeconds),
        completeAndCommit:
          transaction.completeAndCommit &&
          ((ref, response, ttlSeconds) =>
            transaction.completeAndCommit!(ref, this.seal(ref, response), ttlSeconds)),
      }),
    );
  }

  /**
   * The wrapped store's abilities; its operations ability seals and opens an operation's input,
   * state and final response. @inheritDoc
   */
  override capabilities(): IdempotencyStoreCapabilities {
    if (this.abilities) return this.abilities;
    const inner = this.inner.capabilities();
    this.abilities = {
      ...inner,
      operations: inner.operations && sealingOperations(inner.operations, this.sealer),
    };
    return this.abilities;
  }

  private seal(ref: IdempotencyRecordRef, response: StoredResponse): StoredResponse {
    return this.sealer.sealResponse(ref.scope, ref.key, response);
  }
}
