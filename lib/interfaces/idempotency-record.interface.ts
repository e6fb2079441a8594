/** Lifecycle state of a stored record. */
export type IdempotencyRecordStatus = 'in_flight' | 'completed' | 'released' | 'abandoned';

/** A response as stored and replayed: status, allow-listed headers and exact body bytes. */
export interface StoredResponse {
  /** HTTP status. */
  status: number;
  /** Lower-case header names and their values. */
  headers: Record<string, string | string[]>;
  /** The body exactly as it was sent. */
  body: Buffer;
}

/** Identifies one claimed record and its current owner. */
export interface IdempotencyRecordRef {
  /** Caller identity the key belongs to (`''` when none). */
  scope: string;
  /** The Idempotency-Key. */
  key: string;
  /** Random token of the claim; every write after the claim is guarded by it. */
  ownerToken: string;
  /**
   * Tell waiters on other instances when this record settles (its completion or release), as
   * the route waits for the first request (`wait`). A hint: a store that cannot ignores it.
   */
  announce?: boolean;
}

/** Everything the store needs to claim a key. */
export interface ClaimRequest {
  /** Caller identity the key belongs to (`''` when none); keys are unique per scope. */
  scope: string;
  /** The Idempotency-Key. */
  key: string;
  /** SHA-256 (64 hex characters) of the request; another one under the same key is a mismatch. */
  fingerprint: string;
  /** The request's HTTP method, kept on the record. */
  method: string;
  /** The request's path with its query string, kept on the record. */
  path: string;
  /** Token the caller will own the record with if the claim wins. */
  ownerToken: string;
  /** Lease of the claim, in seconds, by the store's clock. */
  lockTimeoutSeconds: number;
  /** How long the completed response will be replayed, in seconds. */
  ttlSeconds: number;
}

/** What one atomic claim found. */
export type ClaimResult = {
  /** Stable id of the record: kept across releases and takeovers, new after expiry. */
  recordId: string;
} & (
  | {
      /** What the claim found: the caller won the key and runs the handler. */
      outcome: 'claimed';
      /** 1 for a fresh key; more when a released or lapsed record was taken again. */
      attempt: number;
    }
  | {
      /** What the claim found: the key has a stored response, which is replayed. */
      outcome: 'completed';
      /** The response to replay. */
      response: StoredResponse;
      /**
       * Milliseconds until the record expires, as the store's clock saw it during the claim.
       * Lets the replay cache keep it no longer than that; without it the record is not cached.
       */
      expiresInMs?: number;
    }
  | {
      /**
       * What the claim found: another caller holds a live lease on the key (`in_flight`, 409),
       * an operation in phases was left for a human (`abandoned`, never run again automatically:
       * docs/design/contract.md#operations-in-phases), or the key was used with another
       * fingerprint (`mismatch`, 422).
       */
      outcome: 'in_flight' | 'abandoned' | 'mismatch';
    }
);

/** A claim's answer other than a key won: what the caller learns about a key someone has. */
export type KnownClaimResult = Exclude<ClaimResult, { outcome: 'claimed' }>;

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
  /** Commits the handler's writes and the completion together. */
  commit(): Promise<void>;
  /** Undoes the handler's writes and the completion. */
  rollback(): Promise<void>;
  /**
   * Optional: `complete()` and, when it wrote, `commit()` as one step, for a store that can send
   * them together (the TypeORM store: one round trip on a pg client that pipelines). When it
   * returns false nothing was committed and the transaction is over. Left out, the caller
   * completes, then commits or rolls back.
   * @returns false when the caller no longer owns the record (nothing was committed)
   */
  completeAndCommit?: IdempotencyStoreTransaction['complete'];
}

/** What a run answers with: the settings of the route that claimed the record. */
export interface IdempotencyRunSettings {
  /** How long the final response is replayed. */
  readonly ttlSeconds: number;
  /** Response headers stored with it (lower case). */
  readonly replayHeaders: readonly string[];
  /** Whether the body is stored (`false`: a route that mints secrets). Stored when absent. */
  readonly storeBody?: boolean;
  /** The largest body stored; a larger one completes the record without it. No limit when absent. */
  readonly maxResponseBytes?: number;
}
