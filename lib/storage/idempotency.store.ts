import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { IdempotencyStoreCapabilities } from './idempotency-store.capabilities';

/**
 * The storage contract, and the injection token of the store in use.
 *
 * Every method may reject when the store is unreachable; the interceptor then fails closed
 * (503 for a claim, the handler never runs unprotected). A store never swallows its own errors.
 *
 * Lifecycle of a record: `claim` creates it `in_flight` with a lease (`lockTimeoutSeconds`,
 * measured by the store's clock); `renew` extends the lease; `complete` makes it `completed`
 * with the response, replayed until `ttlSeconds` pass; `release` lets the key run again.
 * Every call after `claim` is guarded by the owner token: a caller whose lease was taken over
 * changes nothing and is told so by a `false` result.
 */
export abstract class IdempotencyStore {
  /**
   * Claims (scope, key) atomically: of any number of concurrent callers, exactly one wins.
   * Wins when the key is new, expired, released with the same fingerprint, or in flight with
   * the same fingerprint and a lapsed lease (takeover). Otherwise reports what is there:
   * `mismatch` (another fingerprint, in any state) before `in_flight` and `completed`.
   */
  abstract claim(request: ClaimRequest): Promise<ClaimResult>;

  /**
   * Stores the final response and the replay expiry (`ttlSeconds` from now). Owner-guarded.
   * A store that sends it again after its connection failed (it may have committed) counts a
   * record the same owner already completed with the same response as written.
   * @returns false when `ref` no longer owns the record
   */
  abstract complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean>;

  /**
   * Gives the key up. `retry`: the handler ran (or may have) and failed; the record is kept as
   * `released` with its fingerprint, so only the same request can run it again (a different
   * payload still gets 422) and derived keys stay the same. `forget`: the request was rejected
   * before the handler started; the record is deleted so a corrected request can use the key.
   * Owner-guarded.
   * @returns false when `ref` no longer owns the record
   */
  abstract release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean>;

  /**
   * Extends the lease of an in-flight record to `lockTimeoutSeconds` from now. Owner-guarded.
   * @returns false when `ref` no longer owns the record (the lease was lost)
   */
  abstract renew(ref: IdempotencyRecordRef, lockTimeoutSeconds: number): Promise<boolean>;

  /**
   * Deletes up to `batchSize` records whose replay window has passed. Never deletes an
   * in-flight record whose lease is live. Safe to run from several instances at once.
   * @returns how many records were deleted
   */
  abstract purgeExpired(batchSize: number): Promise<number>;

  /**
   * Opens a transaction whose `complete()` commits together with the handler's own writes.
   * Stores that cannot do this throw.
   */
  abstract beginTransaction(): Promise<IdempotencyStoreTransaction>;

  /**
   * Whether `error`, thrown by one of this store's calls or by a query in a transaction it
   * opened, means the store could not be reached (down, restarting, its connection cut) rather
   * than a statement that failed. The library answers a transactional handler or a step of an
   * operation in phases that failed so with 503 `idempotency_store_unavailable` and
   * `Retry-After`, as it answers a failed claim, instead of a 500. A store of your own answers
   * true for its client's connection errors; by default nothing is (the error stays a 500).
   * @param _error - what the call, the transaction or the handler's query threw
   */
  isUnavailable(_error: unknown): boolean {
    return false;
  }

  /**
   * The abilities this store has beyond this contract (operations in phases, staged jobs,
   * health counts, a bootstrap check). Asked once, at bootstrap; none by default. Internal: its
   * ports are the library's own, so a store of your own leaves it as it is.
   * @internal
   */
  capabilities(): IdempotencyStoreCapabilities {
    return {};
  }
}
