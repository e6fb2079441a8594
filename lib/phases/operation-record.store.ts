import type { EntityManager } from 'typeorm';
import type {
  IdempotencyRecordRef,
  IdempotencyRunSettings,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { StagedJob } from './jobs/staged-job.interface';

/** What `bind()` found on the record: where its operation stands. */
export interface BoundOperation {
  /** The record's id (the row's, read under its lock). */
  recordId: string;
  /** The operation name on the record (the one bound now, or an earlier one). */
  operation: string;
  /** `started`, a step name, or `finished`. */
  recoveryPoint: string;
  input: unknown;
  state: Record<string, unknown>;
  /** Seconds since the record was first claimed (database clock). */
  ageSeconds: number;
  /** Whether an earlier run had bound the operation already (this is a resume). */
  resumed: boolean;
}

/** An unfinished operation the completer took over, or one marked abandoned. */
export interface OperationRecordRow extends Pick<
  AbandonedOperation,
  'scope' | 'key' | 'recordId' | 'operation' | 'recoveryPoint'
> {
  /** The fingerprint of the request that started it (its final response is sealed for it). */
  fingerprint: string;
  /** Set for a takeover: the completer's owner token. */
  ownerToken: string | null;
  attempt: number;
  /** The settings of the route that started the operation (null on records older than them). */
  settings: IdempotencyRunSettings | null;
}

/** An abandoned record, as the query API returns it. */
export interface AbandonedOperation {
  /** Caller identity the key belongs to (`''` when none); pass it to `resolveAbandoned()`. */
  scope: string;
  /** The Idempotency-Key; pass it to `resolveAbandoned()`. */
  key: string;
  /** Stable id of the record, from which the foreign calls' derived keys were made. */
  recordId: string;
  /** The operation's registered name. */
  operation: string;
  /** The last recovery point reached; `null` before the first step committed. */
  recoveryPoint: string | null;
  /** The operation's input, as stored when it first ran. */
  input: unknown;
  /** The state its steps carried, as of the last recovery point. */
  state: Record<string, unknown> | null;
  /** Runs of the record: claims and takeovers, completer runs included. */
  attempts: number;
  /** When the record was created. */
  createdAt: Date;
  /** When it was marked abandoned. */
  abandonedAt: Date;
}

/** An abandoned record an operator resolves: its id and fingerprint, read with its settings. */
export type AbandonedRecord = Pick<OperationRecordRow, 'recordId' | 'fingerprint' | 'settings'>;

/** A job a local step stages, with where it came from. */
export type NewStagedJob = Pick<StagedJob, 'name' | 'args' | 'key' | 'origin'>;

/** One local step's transaction, positioned on the record's expected recovery point. */
export interface OperationStepTransaction {
  /** The step's handle for its own writes. */
  readonly manager: EntityManager;
  /** The carried state as the record holds it (read under the row lock). */
  readonly state: Record<string, unknown>;
  /** Writes a job in this transaction: it exists exactly when the step commits. */
  stage(job: NewStagedJob): Promise<void>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
  /** Ends a transaction whose owner lost the lease: its connection is closed, nothing commits. */
  abandon(): Promise<void>;
}

/**
 * The store ability operations in phases need (a store capability, see
 * `IdempotencyStoreCapabilities`). Every write is guarded by the owner token and, where a step
 * moves the record on, by the recovery point it expects (compare-and-set): a stale owner, or a
 * second run of a step that already committed, changes nothing and is told so (`false` or
 * `undefined`). A step transaction given to `advance` or `finish` must come from this store's
 * `beginStep`.
 */
export interface OperationRecordStore {
  /**
   * Binds the operation to the owned record on its first run (name, input, the route's
   * settings, `started`) and reads where it stands; on a later run, only reads.
   * @returns undefined when `ref` no longer owns the record
   */
  bind(
    ref: IdempotencyRecordRef,
    operation: string,
    input: unknown,
    settings: IdempotencyRunSettings,
  ): Promise<BoundOperation | undefined>;
  /**
   * Opens a local step's transaction and locks the record, if `ref` owns it at `expectedPoint`.
   * @returns undefined (and nothing left open) when it does not
   */
  beginStep(
    ref: IdempotencyRecordRef,
    expectedPoint: string,
    isolation: string,
  ): Promise<OperationStepTransaction | undefined>;
  /**
   * Moves the record from `expectedPoint` to `nextPoint` with the carried state, in `step`
   * when given.
   * @returns false when `ref` no longer owns the record at `expectedPoint`
   */
  advance(
    ref: IdempotencyRecordRef,
    expectedPoint: string,
    nextPoint: string,
    state: Record<string, unknown>,
    step?: OperationStepTransaction,
  ): Promise<boolean>;
  /**
   * Moves the record from `expectedPoint` to `finished` with its final response, replayed for
   * `ttlSeconds`; in `step` when given (it is then stored when the step commits).
   * @returns false when `ref` no longer owns the record at `expectedPoint`
   */
  finish(
    ref: IdempotencyRecordRef,
    expectedPoint: string,
    state: Record<string, unknown>,
    response: StoredResponse,
    ttlSeconds: number,
    step?: OperationStepTransaction,
  ): Promise<boolean>;
  /**
   * Marks an owned record abandoned (too old to resume, or its outcome cannot be recorded).
   * @returns false when `ref` no longer owns it
   */
  abandon(ref: IdempotencyRecordRef): Promise<boolean>;
  /**
   * Takes over up to `batchSize` unfinished operations nobody runs (lease lapsed or released),
   * last run at least `afterSeconds` ago and younger than `maxAgeSeconds`, each with a new owner
   * token and lease. Records locked by anyone else are skipped.
   */
  takeOver(
    batchSize: number,
    afterSeconds: number,
    maxAgeSeconds: number,
    lockTimeoutSeconds: number,
  ): Promise<OperationRecordRow[]>;
  /** Marks abandoned up to `batchSize` idle unfinished operations older than `maxAgeSeconds`. */
  abandonOld(batchSize: number, maxAgeSeconds: number): Promise<OperationRecordRow[]>;
  /** Marks abandoned up to `batchSize` idle unfinished operations past their TTL. */
  reapExpired(batchSize: number): Promise<OperationRecordRow[]>;
  /** Deletes up to `batchSize` abandoned records unchanged for `retentionSeconds`. */
  deleteAbandoned(batchSize: number, retentionSeconds: number): Promise<number>;
  /** Abandoned records, longest abandoned first. */
  listAbandoned(limit: number): Promise<AbandonedOperation[]>;
  /** The abandoned record of (scope, key); undefined when none. */
  abandonedRecord(scope: string, key: string): Promise<AbandonedRecord | undefined>;
  /**
   * Resolves an abandoned record: with a response, the record read by `abandonedRecord()` (the
   * same id and fingerprint) becomes finished and is replayed for `ttlSeconds`; without, it is
   * deleted and the key can run again from scratch.
   * @returns false when no abandoned record has that (scope, key) (and that record)
   */
  resolveAbandoned(
    scope: string,
    key: string,
    completion?: { record: AbandonedRecord; response: StoredResponse; ttlSeconds: number },
  ): Promise<boolean>;
}
