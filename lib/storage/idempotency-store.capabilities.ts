import type { OperationRecordStore } from '../phases/operation-record.store';
import type { StagedJobStore } from '../jobs/staged-job.store';

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
  /** The counts of the health indicator. */
  readonly health?: IdempotencyStoreHealthQuery;
  /**
   * Checks at bootstrap that the store can serve (tables and columns in place); throws an
   * `IdempotencyConfigurationError` that says how to fix it.
   */
  readonly verify?: () => Promise<void>;
}
