import type { IdempotencyRecordRef } from '../interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';

/** How much less than asked a freshly renewed lease may leave (its round trip), in ms. */
export const RENEWAL_TOLERANCE_MS = 1000;

/**
 * Renews the lease of one in-flight record every third of `lockTimeoutSeconds` while its
 * handler runs, and gives up after `maxLockHoldSeconds` so a hung handler's key can be taken
 * over. Reports a lost lease once, and aborts `signal` then.
 *
 * It also knows, by the local clock, how much of the lease is surely left: each renewal counts
 * from the moment it was sent, so the estimate errs short.
 */
export class LeaseHeartbeat {
  private timer?: NodeJS.Timeout;
  /** Aborts `signal` when the lease runs out unrenewed (a hung handler past its hold, say). */
  private lapse?: NodeJS.Timeout;
  private busy = false;
  private lostToOwner = false;
  private watching = false;
  private stopped = false;
  private readonly startedAt = Date.now();
  private leaseEndsAt = 0;
  /** Why the lease is gone, once it is. */
  private lostWith?: Error;
  /** Made when someone asks for `signal` (a plain request never does). */
  private controller?: AbortController;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly ref: IdempotencyRecordRef,
    private readonly lockTimeoutSeconds: number,
    private readonly maxLockHoldSeconds: number,
    private readonly onLost: () => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  /**
   * Starts renewing.
   * @param claimedAt - when the claim that began the lease was sent (`Date.now()` then): the
   *   first lease is counted from there, so the estimate of what is left errs short
   */
  start(claimedAt = Date.now()): void {
    this.extendTo(claimedAt + this.lockTimeoutSeconds * 1000);
    const everyMs = Math.max(20, Math.floor((this.lockTimeoutSeconds * 1000) / 3));
    this.timer = setInterval(() => void this.beat(), everyMs);
    this.timer.unref();
  }

  /**
   * Aborted when the lease is found lost (a renewal that no longer owned the record), or when it
   * ran out by the local clock without being renewed: another owner may take the key from then.
   */
  get signal(): AbortSignal {
    // The lapse is watched only once someone listens: a plain request never asks.
    if (!this.watching) {
      this.watching = true;
      this.extendTo(this.leaseEndsAt);
    }
    this.controller ??= new AbortController();
    if (this.lostWith) this.controller.abort(this.lostWith);
    return this.controller.signal;
  }

  /** Milliseconds of lease surely left, by the local clock. */
  remainingMs(): number {
    return this.leaseEndsAt - Date.now();
  }

  /**
   * Makes sure at least `ms` of lease is left, renewing now when less is.
   * @returns false when the lease is lost, or `ms` is more than a whole lease
   */
  async ensureRemaining(ms: number): Promise<boolean> {
    if (this.lostWith) return false;
    if (this.remainingMs() >= ms) return true;
    if (ms > this.lockTimeoutSeconds * 1000) return false;
    await this.renew();
    // A lease just renewed is a whole lease less the renewal's round trip: a step that needs
    // exactly a whole lease (checked at bootstrap) may start with up to RENEWAL_TOLERANCE_MS
    // less, which its margin (foreignStepMarginSeconds) covers.
    return !this.lostWith && this.remainingMs() >= ms - RENEWAL_TOLERANCE_MS;
  }

  /** Stops renewing (and watching the lease); safe to call more than once. */
  stop(): void {
    this.stopped = true;
    this.stopRenewing();
    if (this.lapse) clearTimeout(this.lapse);
    this.lapse = undefined;
  }

  private stopRenewing(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private extendTo(endsAt: number): void {
    this.leaseEndsAt = endsAt;
    if (!this.watching || this.stopped || endsAt === 0) return;
    if (this.lapse) clearTimeout(this.lapse);
    this.lapse = setTimeout(
      () => this.markLost(new Error('nest-idempotency: the lease ran out unrenewed')),
      Math.max(0, endsAt - Date.now()),
    );
    this.lapse.unref();
  }

  /** The first reason the lease is gone wins, as with `AbortController.abort()`. */
  private markLost(reason: Error): void {
    if (this.lostWith) return;
    this.lostWith = reason;
    this.controller?.abort(reason);
  }

  private async beat(): Promise<void> {
    if (Date.now() - this.startedAt >= this.maxLockHoldSeconds * 1000) return this.stopRenewing();
    if (this.busy) return;
    await this.renew();
  }

  private async renew(): Promise<void> {
    this.busy = true;
    const sentAt = Date.now();
    try {
      const owned = await this.store.renew(this.ref, this.lockTimeoutSeconds);
      if (owned) {
        if (!this.lostWith) this.extendTo(sentAt + this.lockTimeoutSeconds * 1000);
      } else if (!this.lostToOwner) {
        this.lostToOwner = true;
        const renewing = this.timer !== undefined;
        this.stop();
        this.markLost(new Error('nest-idempotency: the lease was lost to another owner'));
        if (renewing) this.onLost();
      }
    } catch (error) {
      this.onError(error);
    } finally {
      this.busy = false;
    }
  }
}
