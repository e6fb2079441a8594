/** Lifecycle state of a stored record. */
export type IdempotencyRecordStatus = 'in_flight' | 'completed' | 'released' | 'abandoned';

/** A response as stored and replayed: status, allow-listed headers and exact body bytes. */
export interface StoredResponse {
  status: number;
  /** Lower-case header names and their values. */
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/** Identifies one claimed record and its current owner. */
export interface IdempotencyRecordRef {
  scope: string;
  key: string;
  /** Random token of the claim; every write after the claim is guarded by it. */
  ownerToken: string;
}

/** Everything the store needs to claim a key. */
export interface ClaimRequest {
  scope: string;
  key: string;
  fingerprint: string;
  method: string;
  path: string;
  /** Token the caller will own the record with if the claim wins. */
  ownerToken: string;
  lockTimeoutSeconds: number;
  ttlSeconds: number;
}

/** What one atomic claim found. */
export type ClaimResult =
  | {
      outcome: 'claimed';
      /** Stable id of the record: kept across releases and takeovers, new after expiry. */
      recordId: string;
      /** 1 for a fresh key; more when a released or lapsed record was taken again. */
      attempt: number;
    }
  | {
      outcome: 'completed';
      recordId: string;
      response: StoredResponse;
      /**
       * Milliseconds until the record expires, as the store's clock saw it during the claim.
       * Lets the replay cache keep it no longer than that; without it the record is not cached.
       */
      expiresInMs?: number;
    }
  | { outcome: 'in_flight'; recordId: string }
  /** An operation in phases left for a human (docs/design/contract.md#operations-in-phases): never run again automatically. */
  | { outcome: 'abandoned'; recordId: string }
  | { outcome: 'mismatch'; recordId: string };

/** A transaction opened by the store for `transactional: true` routes. */
export interface IdempotencyStoreTransaction {
  /** The ORM handle bound to the transaction (a TypeORM `EntityManager` for the TypeORM store). */
  readonly manager: unknown;
  /**
   * Writes the completion inside the transaction, guarded by the owner token.
   * @returns false when the caller no longer owns the record (nothing was written)
   */
  complete(
    ref: IdempotencyRecordRef,
    response: StoredResponse,
    ttlSeconds: number,
  ): Promise<boolean>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** What a run answers with: the settings of the route that claimed the record. */
export interface IdempotencyRunSettings {
  /** How long the final response is replayed. */
  readonly ttlSeconds: number;
  /** Response headers stored with it (lower case). */
  readonly replayHeaders: readonly string[];
}
