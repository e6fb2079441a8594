import { scopedKey } from './scoped-key';

/** A key this instance is claiming in the store right now. */
export interface ClaimingEntry {
  readonly state: 'claiming';
  /** Settles (never rejects) once the claim has an answer. */
  readonly settled: Promise<void>;
}

/** A key this instance claimed and whose handler is running, within a lease it took or renewed. */
export interface RunningEntry {
  readonly state: 'running';
  readonly fingerprint: string;
  readonly ownerToken: string;
  readonly recordId: string;
  /** When the lease this instance holds ends at the latest, on the registry's clock. */
  leaseEndsAt: number;
}

/** The record a run answers: its id and its request's fingerprint, as the store returned them. */
export interface RunRecord {
  readonly recordId: string;
  readonly fingerprint: string;
}

/** How a claim begun with {@link InFlightClaims.begin} ended. */
export type ClaimEnd =
  | {
      claimed: true;
      fingerprint: string;
      ownerToken: string;
      recordId: string;
      lockTimeoutSeconds: number;
    }
  | { claimed: false };

/**
 * A claim on its way. Its promise is made only when a duplicate waits on it: most claims have
 * none. A class, not an object literal with a getter, which V8 builds far more slowly.
 */
class Claiming implements ClaimingEntry {
  readonly state = 'claiming';
  private waiting?: Promise<void>;
  private settle?: () => void;
  private ended = false;

  get settled(): Promise<void> {
    if (this.ended) return Promise.resolve();
    return (this.waiting ??= new Promise<void>((resolve) => (this.settle = resolve)));
  }

  end(): void {
    this.ended = true;
    this.settle?.();
  }
}

/**
 * The keys this instance is claiming or executing, so that a duplicate arriving at the same
 * instance gets the store's answer without asking the store: a same-key storm costs one claim
 * per instance instead of one per request.
 *
 * Sound because it only ever answers what the store would: while this instance holds a live
 * lease on a record (its handler is running and the lease it took has not run out), the store
 * answers every other claim of the key with `mismatch` for another fingerprint and `in_flight`
 * for the same one. The local lease end is measured from before the claim was sent, so it is
 * never later than the store's. A duplicate that arrives while the claim itself is on its way
 * waits for it and then looks again; if the claim did not end in a running handler (the key was
 * completed, owned elsewhere, or the store failed), the duplicate asks the store itself.
 */
export class InFlightClaims {
  private readonly entries = new Map<string, ClaimingEntry | RunningEntry>();
  /**
   * The runs this instance won, by owner token, until they end: what record each one answers,
   * still known once its local lease lapsed (its completion is sealed for that record).
   */
  private readonly runs = new Map<string, RunRecord>();

  /** @param now - monotonic clock in milliseconds (injected by tests) */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Entries held now (claims on their way and running handlers). */
  get size(): number {
    return this.entries.size;
  }

  /** What this instance is doing with the key, if anything; a lapsed local lease is forgotten. */
  get(scope: string, key: string): ClaimingEntry | RunningEntry | undefined {
    const id = scopedKey(scope, key);
    const entry = this.entries.get(id);
    if (entry?.state === 'running' && entry.leaseEndsAt <= this.now()) {
      this.entries.delete(id);
      return undefined;
    }
    return entry;
  }

  /**
   * Marks the key as being claimed by this instance.
   * @returns the function to call with the claim's end, or `undefined` when the key already has
   *   an entry (the caller then claims without one)
   */
  begin(scope: string, key: string): ((end: ClaimEnd) => void) | undefined {
    const id = scopedKey(scope, key);
    if (this.get(scope, key)) return undefined;
    const startedAt = this.now();
    const entry = new Claiming();
    this.entries.set(id, entry);
    return (end) => {
      if (this.entries.get(id) !== entry) return;
      if (end.claimed) {
        const running: RunningEntry = {
          state: 'running',
          fingerprint: end.fingerprint,
          ownerToken: end.ownerToken,
          recordId: end.recordId,
          leaseEndsAt: startedAt + end.lockTimeoutSeconds * 1000,
        };
        this.entries.set(id, running);
        this.runs.set(end.ownerToken, running);
      } else {
        this.entries.delete(id);
      }
      entry.end();
    };
  }

  /**
   * Keeps the record of a run this instance won without an entry of its key: a claim that raced
   * another of the key on this instance, or a takeover by the completer.
   */
  won(ownerToken: string, record: RunRecord): void {
    this.runs.set(ownerToken, record);
  }

  /** The record of a run this instance won and that has not ended, its local lease lapsed or not. */
  run(ownerToken: string): RunRecord | undefined {
    return this.runs.get(ownerToken);
  }

  /** The running entry of `ownerToken`, if this instance still holds the key for it. */
  owned(scope: string, key: string, ownerToken: string): RunningEntry | undefined {
    const entry = this.get(scope, key);
    return entry?.state === 'running' && entry.ownerToken === ownerToken ? entry : undefined;
  }

  /**
   * Moves the local lease end of a renewed lease forward.
   * @param renewedAt - on the registry's clock, taken before the renewal was sent
   */
  extend(
    scope: string,
    key: string,
    ownerToken: string,
    lockTimeoutSeconds: number,
    renewedAt: number,
  ): void {
    const entry = this.owned(scope, key, ownerToken);
    if (entry)
      entry.leaseEndsAt = Math.max(entry.leaseEndsAt, renewedAt + lockTimeoutSeconds * 1000);
  }

  /**
   * Forgets a run once its record is completed or released (or its lease lost). Leaves the
   * key's entry when the key is held by another owner by now.
   */
  end(scope: string, key: string, ownerToken: string): void {
    this.runs.delete(ownerToken);
    const id = scopedKey(scope, key);
    const entry = this.entries.get(id);
    if (entry?.state === 'running' && entry.ownerToken === ownerToken) this.entries.delete(id);
  }
}
