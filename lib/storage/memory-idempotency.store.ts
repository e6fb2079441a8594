import { firstRecordId, renewedRecordId } from './record-id';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyRecordStatus,
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import { IdempotencyStore } from './idempotency.store';
import { scopedKey } from './local/scoped-key';

interface MemoryRecord {
  recordId: string;
  fingerprint: string;
  status: IdempotencyRecordStatus;
  ownerToken: string | null;
  lockedUntil: number;
  expiresAt: number;
  attempts: number;
  response?: StoredResponse;
}

/**
 * In-process store for unit tests and local experiments only: nothing survives a restart and
 * nothing is shared between instances. It refuses to start when `NODE_ENV=production`.
 * Its transactions carry no database handle (`manager` is `undefined`).
 */
export class MemoryIdempotencyStore extends IdempotencyStore {
  private readonly records = new Map<string, MemoryRecord>();

  /**
   * @param now - clock in milliseconds; inject one to test leases and expiry without sleeping
   * @throws IdempotencyConfigurationError when `NODE_ENV=production`
   */
  constructor(private readonly now: () => number = Date.now) {
    super();
    if (process.env.NODE_ENV === 'production') {
      throw IdempotencyConfigurationError.memoryStoreInProduction();
    }
  }

  /** @inheritDoc */
  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const id = scopedKey(request.scope, request.key);
    const now = this.now();
    const existing = this.records.get(id);
    const running = existing?.status === 'in_flight' && existing.lockedUntil > now;
    const claimed = (attempt: number, recordId: string): ClaimResult => {
      this.records.set(id, {
        recordId,
        fingerprint: request.fingerprint,
        status: 'in_flight',
        ownerToken: request.ownerToken,
        lockedUntil: now + request.lockTimeoutSeconds * 1000,
        expiresAt: now + request.ttlSeconds * 1000,
        attempts: attempt,
      });
      return { outcome: 'claimed', recordId, attempt };
    };
    if (!existing) return claimed(1, firstRecordId(request.scope, request.key));
    if (existing.expiresAt <= now && !running)
      return claimed(1, renewedRecordId(existing.recordId));
    const { recordId, response } = existing;
    if (existing.fingerprint !== request.fingerprint) return { outcome: 'mismatch', recordId };
    if (existing.status === 'completed' && response) {
      return { outcome: 'completed', recordId, response, expiresInMs: existing.expiresAt - now };
    }
    if (running) return { outcome: 'in_flight', recordId };
    return claimed(existing.attempts + 1, recordId);
  }

  /** @inheritDoc */
  async complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean> {
    const record = this.owned(ref);
    if (!record) return false;
    record.status = 'completed';
    record.response = { ...response, body: Buffer.from(response.body) };
    record.expiresAt = this.now() + ttlSeconds * 1000;
    return true;
  }

  /** @inheritDoc */
  async release(ref: IdempotencyRecordRef, mode: 'retry' | 'forget'): Promise<boolean> {
    const record = this.owned(ref);
    if (!record) return false;
    if (mode === 'forget' && record.attempts === 1) {
      this.records.delete(scopedKey(ref.scope, ref.key));
    } else {
      record.status = 'released';
    }
    return true;
  }

  /** @inheritDoc */
  async renew(ref: IdempotencyRecordRef, lockTimeoutSeconds: number): Promise<boolean> {
    const record = this.owned(ref);
    if (!record) return false;
    record.lockedUntil = this.now() + lockTimeoutSeconds * 1000;
    return true;
  }

  /** @inheritDoc */
  async purgeExpired(batchSize: number): Promise<number> {
    const now = this.now();
    let deleted = 0;
    for (const [id, r] of this.records) {
      if (deleted >= batchSize) break;
      if (r.expiresAt <= now && !(r.status === 'in_flight' && r.lockedUntil > now)) {
        this.records.delete(id);
        deleted++;
      }
    }
    return deleted;
  }

  /**
   * The completion is written at `complete()` (as PostgreSQL writes it inside the transaction)
   * and undone on rollback, so a claim racing the commit sees the completed record (the
   * contract: {@link IdempotencyStore.beginTransaction}).
   */
  async beginTransaction(): Promise<IdempotencyStoreTransaction> {
    let undo: (() => void) | undefined;
    return {
      manager: undefined,
      complete: async (ref, response, ttlSeconds) => {
        const record = this.owned(ref);
        if (!record) return false;
        const before = { ...record };
        await this.complete(ref, response, ttlSeconds);
        undo = () => {
          if (this.records.get(scopedKey(ref.scope, ref.key)) === record)
            Object.assign(record, before);
        };
        return true;
      },
      commit: async () => void (undo = undefined),
      rollback: async () => {
        undo?.();
        undo = undefined;
      },
    };
  }

  private owned(ref: IdempotencyRecordRef): MemoryRecord | undefined {
    const record = this.records.get(scopedKey(ref.scope, ref.key));
    return record && record.status === 'in_flight' && record.ownerToken === ref.ownerToken
      ? record
      : undefined;
  }
}
