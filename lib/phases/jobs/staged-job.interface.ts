import type { EntityManager } from 'typeorm';

/** A job staged by a local step, as its handler receives it. */
export interface StagedJob<Args = unknown> {
  /** Row id in the jobs table. */
  readonly id: string;
  /** The handler's name, as given to `stage()`. */
  readonly name: string;
  /** The arguments given to `stage()`. */
  readonly args: Args;
  /**
   * Stable key of the job: the same on every delivery of it (64 hex characters). Delivery is
   * at least once; use this key to make the handler's effects happen once.
   *
   * It is the SHA-256 (hex) of `<record id> NUL <step name> NUL <n> NUL <job name>`, where the
   * record id identifies the idempotent request's record and `n` counts the `stage()` calls of
   * the step run so far (0 for its first). So two jobs a step stages, even of one name with the
   * same arguments, get distinct keys, and a retry of the step that stages the same jobs in the
   * same order gets the same keys again.
   */
  readonly key: string;
  /**
   * 1 on the first delivery; one more per delivery started since, whether it failed, timed out
   * or never reported back (its process died): attempts are counted when a delivery begins.
   */
  readonly attempt: number;
  /** The idempotent request whose step staged the job. */
  readonly origin: {
    /** The request's scope (`''` when none). */
    readonly scope: string;
    /** The request's Idempotency-Key. */
    readonly key: string;
  };
}

/**
 * Handles the staged jobs of one name; declare it as a provider class with
 * `@IdempotentJobHandler(name)`.
 */
export interface IdempotencyJobHandlerInstance<Args = unknown> {
  /**
   * Delivers one job. Resolving means delivered: the job row is deleted in this delivery's own
   * transaction, which commits after this returns. Throwing means failed: the job is retried
   * with backoff and, after `jobs.maxAttempts`, kept as dead; the error's message is kept as the
   * job's last error (NUL characters removed, cut at 2000 characters).
   *
   * It has `jobs.timeoutSeconds`. Past it, `signal` aborts, the transaction is ended by closing
   * its connection (writes through `manager` roll back) and the delivery counts as failed, even
   * if this promise never settles. Stop work elsewhere when `signal` aborts.
   *
   * @param job - the job
   * @param manager - this job's transaction: writes made through it commit exactly when the
   *   job's deletion does, so they happen once
   * @param signal - aborts when the delivery's time is up
   */
  handle(job: StagedJob<Args>, manager: EntityManager, signal: AbortSignal): Promise<void>;
}

/** A job kept for a human after its last failed delivery. */
export interface DeadJob {
  /** Row id in the jobs table. */
  id: string;
  /** The handler's name. */
  name: string;
  /** The arguments given to `stage()`. */
  args: unknown;
  /** Stable key of the job (`StagedJob.key`). */
  key: string;
  /** Deliveries started. */
  attempts: number;
  /** The last failed delivery's error message, if it left one. */
  lastError: string | null;
  /** The idempotent request whose step staged the job. */
  origin: {
    /** The request's scope (`''` when none). */
    scope: string;
    /** The request's Idempotency-Key. */
    key: string;
  };
  /** When the job was staged. */
  createdAt: Date;
  /** When it was last changed: when it was made dead. */
  updatedAt: Date;
}
