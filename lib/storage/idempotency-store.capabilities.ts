import type { KnownClaimResult } from '../interfaces/idempotency-record.interface';
import type { OperationRecordStore } from '../phases/operation-record.store';
import type { StagedJobStore } from '../phases/jobs/staged-job.store';

/** What the record table looks like to a health check. Each count stops at the read's limit. */
export interface IdempotencyTableHealth {
  /** Records in flight whose lease lapsed. */
  stuckInFlight: number;
  /** Unfinished operations in phases nobody runs (released, or in flight with a lapsed lease). */
  idleOperations: number;
  /** Operations in phases marked abandoned, waiting for a human. */
  abandonedOperations: number;
  /** Expired records the purge may delete and has not yet. */
  purgeBacklog: number;
  /** Milliseconds the read took. */
  latencyMs: number;
}

/** Reads the counts a health check reports. */
export interface IdempotencyStoreHealthQuery {
  /**
   * @param limit - the most rows one count reads
   * @param timeoutMs - how long the read may take before it fails
   */
  read(limit: number, timeoutMs: number): Promise<IdempotencyTableHealth>;
}

/** What a store tells the waiters of one instance (`IdempotencyStoreWakeUps.listen()`). */
export interface IdempotencyWakeUpListener {
  /** Whether anyone waits now: a local settlement names its record only then. */
  readonly waiting: boolean;
  /** A record settled (completed or released): its wake token (`wakeTokenOf(scope, key)`). */
  settled(token: string): void;
  /** Settlements may have been missed (the listening connection came back): look again. */
  missed(): void;
}

/**
 * How waiters learn that a record in flight settled, so that a duplicate waiting for the first
 * request (`Prefer: wait`) looks again at once instead of polling. A store reports records
 * settled on other instances, while `pushing` (the PostgreSQL store's `LISTEN`), by writes whose
 * ref asks it to (`IdempotencyRecordRef.announce`); the module's own layer adds those settled on
 * this instance. Without this ability, or while not pushing, waiters poll.
 */
export interface IdempotencyStoreWakeUps {
  /**
   * Reports settlements to `listener` from now on. The first call opens whatever the store needs
   * (the PostgreSQL store's listening connection); later calls only make sure it is open.
   */
  listen(listener: IdempotencyWakeUpListener): void;
  /** Whether settlements on other instances are reported now; waiters poll while not. */
  readonly pushing: boolean;
  /** Closes what `listen()` opened (at shutdown). */
  close(): Promise<void>;
}

/**
 * What this instance already knows of a key, read without waiting on anything: the answer
 * `IdempotencyStore.claim()` would give, when this instance can tell it alone. A replay from
 * memory or a duplicate refused while the first request runs here then costs no promise.
 */
export interface IdempotencyStoreMemory {
  /**
   * @returns `completed` (the record, for a replay), `mismatch` or `in_flight`, exactly as the
   *   store would answer a claim now; `undefined` when only the store can tell
   */
  answer(scope: string, key: string, fingerprint: string): KnownClaimResult | undefined;
}

/** A record as the operator tool shows it. Times are the database's. */
export interface IdempotencyOperatorRecord {
  /** Caller identity the key belongs to (`''` when none). */
  scope: string;
  /** The Idempotency-Key. */
  key: string;
  /** `in_flight`, `completed`, `released` or `abandoned`. */
  status: string;
  /** In flight with a lapsed lease: nobody runs it, and `release` may free it. */
  stuck: boolean;
  /** Stable id of the record (derived keys of operations in phases are made from it). */
  recordId: string;
  /** The request's method. */
  method: string;
  /** The request's path. */
  path: string;
  /** The operation in phases bound to the record, if any. */
  operation: string | null;
  /** Its recovery point: `started`, a step name or `finished`; null for a plain route. */
  recoveryPoint: string | null;
  /** Runs of the record: claims and takeovers, completer runs included. */
  attempts: number;
  /** Seconds the lease has left (0 once lapsed); null when no lease is held. */
  leaseSecondsLeft: number | null;
  /** When the record expires (its replay window ends). */
  expiresAt: Date;
  /** When the record was created. */
  createdAt: Date;
  /** When it last changed. */
  updatedAt: Date;
  /** The stored response's status; null while none is stored. */
  storedStatus: number | null;
  /** The stored response's body, as stored (sealed when the store seals); only when asked for. */
  body?: Buffer | null;
}

/** Which records `IdempotencyStoreOperator.list()` reads. */
export type IdempotencyOperatorListKind = 'in_flight' | 'stuck' | 'abandoned';

/** How `IdempotencyStoreOperator.releaseStuck()` ended. */
export type IdempotencyOperatorReleaseResult =
  'released' | 'lease_live' | 'not_in_flight' | 'not_found';

/**
 * What the operator tool reads and changes, each call one statement bounded by the store's
 * timeout. Nothing here is used while serving requests.
 */
export interface IdempotencyStoreOperator {
  /**
   * One record.
   * @param withBody - read the stored body too
   * @returns undefined when there is no record for (scope, key)
   */
  inspect(
    scope: string,
    key: string,
    withBody: boolean,
  ): Promise<IdempotencyOperatorRecord | undefined>;
  /**
   * Records of one kind: `in_flight` (oldest first), `stuck` (in flight with a lapsed lease,
   * longest lapsed first) or `abandoned` (longest abandoned first). Bodies are not read.
   * @param limit - at most this many
   */
  list(kind: IdempotencyOperatorListKind, limit: number): Promise<IdempotencyOperatorRecord[]>;
  /**
   * Releases a record in flight whose lease lapsed, so that a retry runs it (an operation in
   * phases resumes from its recovery point). A live lease is never touched.
   */
  releaseStuck(scope: string, key: string): Promise<IdempotencyOperatorReleaseResult>;
}

/**
 * What a store can do beyond the core contract of `IdempotencyStore`. The module asks once, at
 * bootstrap (`IdempotencyStore.capabilities()`), and each feature uses the ability it needs
 * through this narrow port: a store without it makes the feature unavailable, with a clear
 * error, instead of being recognised by its class.
 */
export interface IdempotencyStoreCapabilities {
  /** Operations in phases, the completer and the reaper of unfinished operations. */
  readonly operations?: OperationRecordStore;
  /** Staged jobs and their drainer. */
  readonly jobs?: StagedJobStore;
  /** Wake-ups of waiters when records settle on other instances. */
  readonly wakeUps?: IdempotencyStoreWakeUps;
  /** Claims answered from this instance's own knowledge, without waiting (the local-first layer). */
  readonly memory?: IdempotencyStoreMemory;
  /** The counts of the health indicator. */
  readonly health?: IdempotencyStoreHealthQuery;
  /** What the operator tool (`nest-idempotency/cli`) reads and changes. */
  readonly operator?: IdempotencyStoreOperator;
  /**
   * Checks at bootstrap that the store can serve (tables and columns in place); throws an
   * `IdempotencyConfigurationError` that says how to fix it.
   */
  readonly verify?: () => Promise<void>;
}
