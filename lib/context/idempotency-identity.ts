import { createHash } from 'node:crypto';

/** The identity of the idempotent request (or completer run) being handled. */
export interface IdempotencyRequestIdentity {
  /** Caller identity the key belongs to (`''` when none). */
  scope: string;
  /** The Idempotency-Key, unquoted. */
  key: string;
  /** Stable id of the record, kept across releases, takeovers and restarts. */
  recordId: string;
  /** 1 on the first run of the key; more when it runs again after a release or takeover. */
  attempt: number;
}

/**
 * The derived key of `label` for a record: SHA-256 (hex) of its stable id and the label.
 * Internal; requests reach it through `IdempotencyContext.derivedKey()`, steps through their
 * context.
 */
export function deriveKey(recordId: string, label: string): string {
  return createHash('sha256').update(`${recordId}\u0000${label}`).digest('hex');
}
