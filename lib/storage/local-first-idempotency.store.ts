import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  KnownClaimResult,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import { IdempotencyStore } from './idempotency.store';
import type {
  IdempotencyStoreCapabilities,
  IdempotencyStoreWakeUps,
  IdempotencyWakeUpListener,
} from './idempotency-store.capabilities';
import { wakeTokenOf } from '../waiting/wake-token';
import { learningOperations } from './local/learning-operations';
import { learningTransaction } from './local/learning-transaction';
import { InFlightClaims } from './local/in-flight-claims';
import { rejectOnThrow } from '../utils/reject-on-throw';
import { ReplayCache } from './local/replay-cache';
import { RecordSealer } from './sealed/record-sealer';
import { sealingOperations } from './sealed/sealing-operations';

/** How the local-first store keeps what it knows and what it writes. */
export interface LocalFirstStoreOptions {
  /** Entries of the in-process replay cache; 0 turns it off. */
  maxEntries: number;
  /** Bytes of responses the replay cache holds at most. */
  maxBytes: number;
  /**
   * The codec of what crosses to the wrapped store (encryption at rest); by default one without
   * keys, which seals nothing and refuses a sealed record rather than replay its ciphertext.
   */
  sealer?: RecordSealer;
}

/**
 * A store that answers from this instance's own knowledge whenever that is exactly what the
 * wrapped store would answer, and asks the wrapped store otherwise:
 *
 * - a completed record never changes until it expires, so records this instance completed or
 *   replayed are kept in a bounded cache (`ReplayCache`) and their claims answered from it —
 *   `completed` for the same fingerprint, `mismatch` for another. An entry expires no later
 *   than its record: its clock starts before the record's expiry was written or read.
 * - while this instance holds a live lease on a key (a claim it won, renewed by its owner),
 *   every other claim of the key is answered `in_flight` or `mismatch`, as the store would.
 *   A claim that arrives while this instance's own claim of the key is on its way waits for it
 *   once, then looks again.
 *
 * Anything else — a first execution, a takeover, another instance's key — is decided by the
 * wrapped store. Writes always go to the wrapped store; this layer only learns from them, and
 * tells this instance's waiters (`wait`) when a record it completed or released settled, through
 * the `wakeUps` ability it adds to the wrapped store's.
 *
 * At its edge to the wrapped store it applies the `encryption` codec (`RecordSealer`): every
 * response it hands down is sealed, every response a claim finds is opened before it is
 * cached or answered, and so are an operation's input and state (`sealingOperations`). What
 * cannot be opened, or is in the clear when it may not be, makes the claim throw
 * `idempotency_record_unreadable` (500): neither replayed nor run again. So this layer, the
 * replay cache and everything above see only what the seal vouches for, and the wrapped store —
 * a user's own included — only what is sealed.
 */
export class LocalFirstIdempotencyStore extends IdempotencyStore {
  private readonly cache: ReplayCache;
  private readonly inFlight: InFlightClaims;
  private readonly sealer: RecordSealer;
  private abilities?: IdempotencyStoreCapabilities;
  /** The waiters of this instance, once one of its routes may wait. */
  private wakeListener?: IdempotencyWakeUpListener;

  /**
   * @param inner - the store that decides
   * @param options - replay cache size, and the sealer
   * @param now - monotonic clock in milliseconds (injected by tests; must run at the same pace
   *   as the wrapped store's clock)
   */
  constructor(
    readonly inner: IdempotencyStore,
    options: LocalFirstStoreOptions,
    private readonly now: () => number = () => performance.now(),
  ) {
    super();
    this.cache = new ReplayCache(options.maxEntries, options.maxBytes, now);
    this.inFlight = new InFlightClaims(now);
    this.sealer = options.sealer ?? new RecordSealer(null);
  }

  /**
   * Answered here when this instance knows the key, else by the wrapped store. Written with
   * `then()` rather than as an async function: every first execution comes through here.
   * @inheritDoc
   */
  claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, fingerprint } = request;
    const local = this.answerLocally(scope, key, fingerprint);
    if (local === undefined) return this.claimFromStore(request);
    if (!(local instanceof Promise)) return Promise.resolve(local);
    // This instance's own claim of the key is on its way: wait for it once, then look again.
    return local.then(
      (): ClaimResult | Promise<ClaimResult> =>
        (this.answerLocally(scope, key, fingerprint, true) as KnownClaimResult | undefined) ??
        this.claimFromStore(request),
    );
  }

  /** @inheritDoc */
  complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean> {
    const entry = this.inFlight.owned(ref.scope, ref.key, ref.ownerToken);
    const sentAt = this.now();
    return this.settle(
      ref,
      () => this.inner.complete(ref, this.seal(ref, response), ttlSeconds),
      entry &&
        ((owned) => owned && this.remember(ref, response, sentAt + ttlSeconds * 1000, entry)),
    );
  }

  /** @inheritDoc */
  release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean> {
    return this.settle(ref, () => this.inner.release(ref, mode));
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, lockTimeoutSeconds: number): Promise<boolean> {
    const sentAt = this.now();
    const owned = await this.inner.renew(ref, lockTimeoutSeconds);
    if (owned) this.inFlight.extend(ref.scope, ref.key, ref.ownerToken, lockTimeoutSeconds, sentAt);
    else this.inFlight.end(ref.scope, ref.key, ref.ownerToken);
    return owned;
  }

  /** @inheritDoc */
  purgeExpired(batchSize: number): Promise<number> {
    return this.inner.purgeExpired(batchSize);
  }

  /** The wrapped store's answer. @inheritDoc */
  override isUnavailable(error: unknown): boolean {
    return this.inner.isUnavailable(error);
  }

  /**
   * The completion is sealed, and remembered once the transaction commits (`learningTransaction`).
   * @inheritDoc
   */
  beginTransaction(): Promise<IdempotencyStoreTransaction> {
    return this.inner.beginTransaction().then((transaction) =>
      learningTransaction(transaction, {
        now: () => this.now(),
        seal: (ref, response) => this.seal(ref, response),
        committed: (ref, response, expiresAt) => this.committed(ref, response, expiresAt),
        notCommitted: (ref, error) => this.notCommitted(ref, error),
      }),
    );
  }

  /** A transaction committed its completion: the record is known here as completed. */
  private committed(ref: IdempotencyRecordRef, response: StoredResponse, expiresAt: number): void {
    this.remember(ref, response, expiresAt);
    this.ended(ref);
  }

  /**
   * A transaction's completion did not commit, or committed unconfirmed (a stalled synchronous
   * standby: the key is then released by nobody). Either way the key is the wrapped store's to
   * answer from now on, never this instance's cache.
   */
  private notCommitted(ref: IdempotencyRecordRef | undefined, error: unknown): never {
    if (ref) this.ended(ref);
    throw error;
  }

  /**
   * The wrapped store's abilities; its operations ability seals an operation's input, state and
   * response on their way down, and reports each write to this layer, which learns of
   * completions and ended runs from them as it does from `complete()`. Adds `memory`: the claims
   * this layer answers alone, read without a promise.
   * @inheritDoc
   */
  override capabilities(): IdempotencyStoreCapabilities {
    if (this.abilities) return this.abilities;
    const inner = this.inner.capabilities();
    this.abilities = {
      ...inner,
      operations:
        inner.operations &&
        learningOperations(
          sealingOperations(inner.operations, this.sealer, (ref) =>
            this.inFlight.run(ref.ownerToken),
          ),
          {
            now: () => this.now(),
            completed: (ref, response, expiresAt) => this.remember(ref, response, expiresAt),
            ended: (ref) => this.ended(ref),
            taken: (rows) => rows.forEach((row) => this.inFlight.won(row.ownerToken!, row)),
          },
        ),
      wakeUps: this.localWakeUps(inner.wakeUps),
      memory: {
        answer: (scope, key, fingerprint) => {
          const local = this.answerLocally(scope, key, fingerprint);
          return local instanceof Promise ? undefined : local;
        },
      },
    };
    return this.abilities;
  }

  /**
   * The wrapped store's wake-ups (records settled on other instances), plus those of the
   * records this instance settles: every completion and release goes through this layer.
   */
  private localWakeUps(remote: IdempotencyStoreWakeUps | undefined): IdempotencyStoreWakeUps {
    return {
      listen: (listener) => {
        this.wakeListener = listener;
        remote?.listen(listener);
      },
      get pushing() {
        return remote?.pushing ?? false;
      },
      close: async () => {
        this.wakeListener = undefined;
        await remote?.close();
      },
    };
  }

  /**
   * Ends this instance's run of the record, once a write that ends it settled (and was learnt),
   * and wakes the record's waiters here.
   */
  private ended(ref: IdempotencyRecordRef): void {
    this.inFlight.end(ref.scope, ref.key, ref.ownerToken);
    if (this.wakeListener?.waiting) this.wakeListener.settled(wakeTokenOf(ref.scope, ref.key));
  }

  /**
   * What this instance knows of the key: the answer, nothing (`undefined`: ask the store), or,
   * while its own claim of the key is on its way and `waited` is false, that claim's settling.
   */
  private answerLocally(
    scope: string,
    key: string,
    fingerprint: string,
    waited = false,
  ): KnownClaimResult | Promise<void> | undefined {
    const cached = this.cache.get(scope, key);
    const local = cached ? undefined : this.inFlight.get(scope, key);
    const known = cached ?? (local?.state === 'running' ? local : undefined);
    if (!known) return local?.state === 'claiming' && !waited ? local.settled : undefined;
    const { recordId } = known;
    if (known.fingerprint !== fingerprint) return { outcome: 'mismatch', recordId };
    if (!cached) return { outcome: 'in_flight', recordId };
    return { outcome: 'completed', recordId, response: cached.response };
  }

  /**
   * A key this instance does not know, claimed in the wrapped store: a completed record's
   * response opened, then learnt from the answer.
   */
  private claimFromStore(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, fingerprint, ownerToken, lockTimeoutSeconds } = request;
    const endClaim = this.inFlight.begin(scope, key);
    const sentAt = this.now();
    const failed = (error: unknown): never => {
      endClaim?.({ claimed: false });
      throw error;
    };
    return rejectOnThrow(() => this.inner.claim(request)).then((result) => {
      if (result.outcome === 'completed') {
        // Its response as it was before it was sealed (the same one when it was stored in the
        // clear and may be read so); one that cannot be opened makes the claim throw.
        const { recordId, response, expiresInMs } = result;
        try {
          const what = `The record ${recordId}`;
          const plain = this.sealer.openResponse(scope, key, response, what, recordId, fingerprint);
          if (plain !== response) result = { ...result, response: plain };
        } catch (error) {
          failed(error);
        }
        if (expiresInMs !== undefined) {
          const completion = { recordId, fingerprint, response: result.response };
          this.cache.set(scope, key, completion, sentAt + expiresInMs);
        }
      }
      // After the cache is filled: claims waiting on this one look there first.
      if (result.outcome !== 'claimed') endClaim?.({ claimed: false });
      else if (endClaim) {
        const { recordId } = result;
        endClaim({ claimed: true, fingerprint, ownerToken, recordId, lockTimeoutSeconds });
      }
      // A claim that raced another of the key here has no entry, but its run is known.
      else this.inFlight.won(ownerToken, { ...result, fingerprint });
      return result;
    }, failed);
  }

  /**
   * Ends this instance's hold on the key once a write that ends its run settles (whatever its
   * outcome), learns from a write that succeeded, and wakes the key's waiters.
   * @param learn - what a settled write teaches this layer (a completion to replay)
   */
  private settle(
    ref: IdempotencyRecordRef,
    write: () => Promise<boolean>,
    learn?: (owned: boolean) => void,
  ): Promise<boolean> {
    return rejectOnThrow(write).then(
      (owned) => {
        learn?.(owned);
        this.ended(ref);
        return owned;
      },
      (error: unknown) => {
        this.inFlight.end(ref.scope, ref.key, ref.ownerToken);
        throw error;
      },
    );
  }

  /**
   * The response as the wrapped store is to keep it: sealed when encryption is on, for the
   * record and fingerprint of the claim (or the completer's takeover) this instance won.
   */
  private seal(ref: IdempotencyRecordRef, response: StoredResponse): StoredResponse {
    const record = this.inFlight.run(ref.ownerToken);
    return this.sealer.sealResponse(ref.scope, ref.key, response, record);
  }

  /**
   * Keeps a completion for replays, when this instance runs its record (`entry`: looked up before
   * the write was sent, when the write ends the run).
   */
  private remember(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    expiresAt: number,
    entry = this.inFlight.owned(ref.scope, ref.key, ref.ownerToken),
  ): void {
    if (!entry) return;
    const { recordId, fingerprint } = entry;
    this.cache.set(ref.scope, ref.key, { recordId, fingerprint, response }, expiresAt);
  }
}
