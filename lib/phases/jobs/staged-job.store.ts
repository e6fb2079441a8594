import type { EntityManager } from 'typeorm';
import type { DeadJob, StagedJob } from './staged-job.interface';

/**
 * A job the drainer has claimed: its attempt is counted and committed before delivery
 * (`attempt` is the `attempts` column after the claim, this delivery included).
 */
export interface ClaimedJob extends StagedJob {
  /**
   * The job had already started `maxAttempts` deliveries without a recorded outcome for the last
   * one (its drainer died, lost its connection, or could not write the failure): the claim made
   * it dead instead of delivering it again.
   */
  readonly exhausted: boolean;
}

/** What one look-up of due jobs found. */
export interface DueJobs {
  /** Ids of pending jobs due by the cutoff, in delivery order. */
  ids: string[];
  /** The cutoff used: pass it to the same drain's later look-ups and claims. */
  cutoff: string | null;
  /**
   * Seconds until the earliest pending job seen that is not due yet (negative: already due), or
   * undefined when the look-up saw none. A hint for an idle drainer's next poll.
   */
  nextDueInSeconds: number | undefined;
}

/**
 * The transaction one job is delivered in. It holds the job's row lock (so no other drainer can
 * claim the job while it runs) and has already deleted the row: committing it is what makes the
 * delivery count, together with whatever the handler wrote through `manager`.
 */
export interface JobDelivery {
  /** The handler's handle on the transaction. */
  readonly manager: EntityManager;
  /** Commits the delivery (the deletion and the handler's writes). */
  commit(): Promise<void>;
  /** Rolls the delivery back: the job stays, as claimed. */
  rollback(): Promise<void>;
  /**
   * Ends the delivery by closing its connection, for a handler past its time: PostgreSQL rolls
   * the transaction back and releases the row lock without waiting for the handler.
   */
  abandon(): Promise<void>;
}

/** How a recorded failure left the job. */
export type JobFailureOutcome = 'pending' | 'dead' | 'gone';

/**
 * The storage port of the staged-job drainer (docs/design/contract.md#operations-in-phases). Jobs are written by local steps
 * (`stage()` of the implementation, in the step's transaction); this is what delivering them
 * needs.
 *
 * Contract:
 * - `findDue` is a plain read: it locks nothing and may list jobs another drainer claims first.
 * - `claim` is atomic and commits on its own: it counts the delivery (`attempts + 1`) and leases
 *   the job (`run_after` moves `leaseSeconds` ahead) before any handler runs, so a delivery that
 *   crashes, hangs or cannot record its failure is still counted. It skips a job another drainer
 *   holds (`SKIP LOCKED`), has claimed (no longer due by the cutoff), or that is no longer pending.
 * - `deliver` opens the job's own transaction, locks and deletes its row there, guarded by the
 *   claimed attempt: undefined when another drainer claimed it since (the lease ran out). One
 *   job's delivery never shares a transaction, a lock or a connection with another's.
 * - `fail` is one statement of its own, guarded by the claimed attempt (`gone` when the job was
 *   delivered or reclaimed meanwhile); the error text must already be storable (no NUL).
 * - Every call is bounded by the store's timeout and throws when the store is unreachable.
 */
export interface StagedJobStore {
  /**
   * How long a claim keeps other drainers off a job before its delivery's transaction locks it:
   * long enough for that transaction to begin, bounded by the store's timeout.
   */
  readonly claimHoldSeconds: number;

  /**
   * Pending jobs by due time, up to `limit`.
   * @param cutoff - the drain's cutoff from an earlier look-up; null: now, in the database's clock
   */
  findDue(limit: number, cutoff: string | null): Promise<DueJobs>;

  /**
   * Claims one job due by `cutoff` for a delivery, committed at once.
   * @param maxAttempts - a job that already started this many deliveries is made dead instead
   * @param leaseSeconds - how long other drainers leave the claimed job alone before it is locked
   * @returns the claimed job, or undefined when it is not there to claim
   */
  claim(
    id: string,
    cutoff: string | null,
    maxAttempts: number,
    leaseSeconds: number,
  ): Promise<ClaimedJob | undefined>;

  /**
   * Opens the delivery transaction of a claimed job.
   * @returns the delivery, or undefined when the claim was lost to another drainer
   */
  deliver(job: ClaimedJob): Promise<JobDelivery | undefined>;

  /**
   * Records a failed delivery of a claimed job: it waits `delaySeconds`, or is kept as dead once
   * `attempt` reached `maxAttempts`.
   */
  fail(
    job: ClaimedJob,
    error: string,
    delaySeconds: number,
    maxAttempts: number,
  ): Promise<JobFailureOutcome>;

  /** Dead jobs, oldest first. */
  listDead(limit: number): Promise<DeadJob[]>;

  /** Puts a dead job back in the queue, due now, with its attempts reset. */
  retryDead(id: string): Promise<boolean>;

  /** Deletes a dead job for good. */
  deleteDead(id: string): Promise<boolean>;

  /**
   * Tells `listener` whenever this process stages a job (before the staging transaction
   * commits: a hint to poll soon, not a promise that the job is visible).
   * @returns a function that stops telling it
   */
  onStaged(listener: () => void): () => void;
}
