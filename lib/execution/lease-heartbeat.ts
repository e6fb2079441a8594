import type { IdempotencyRecordRef } from '../interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';

/**
 * Renews the lease of one in-flight record every third of `lockTimeoutSeconds` while its
 * handler runs, and gives up after `maxLockHoldSeconds` so a hung handler's key can be taken
 * over. Reports a lost lease once.
 */
export class LeaseHeartbeat {
  private timer?: NodeJS.Timeout;
  private busy = false;
  private readonly startedAt = Date.now();

  constructor(
    private readonly store: IdempotencyStore,
    private readonly ref: IdempotencyRecordRef,
    private readonly lockTimeoutSeconds: number,
    private readonly maxLockHoldSeconds: number,
    private readonly onLost: () => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Starts renewing. */
  start(): void {
    const everyMs = Math.max(20, Math.floor((this.lockTimeoutSeconds * 1000) / 3));
    this.timer = setInterval(() => void this.beat(), everyMs);
    this.timer.unref();
  }

  /** Stops renewing; safe to call more than once. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async beat(): Promise<void> {
    if (Date.now() - this.startedAt >= this.maxLockHoldSeconds * 1000) return this.stop();
    if (this.busy) return;
    this.busy = true;
    try {
      const owned = await this.store.renew(this.ref, this.lockTimeoutSeconds);
      if (!owned && this.timer) {
        this.stop();
        this.onLost();
      }
    } catch (error) {
      this.onError(error);
    } finally {
      this.busy = false;
    }
  }
}
