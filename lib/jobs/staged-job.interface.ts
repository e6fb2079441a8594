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
   */
  readonly key: string;
  /** 1 on the first delivery; more after failed deliveries. */
  readonly attempt: number;
  /** The idempotent request whose step staged the job. */
  readonly origin: { readonly scope: string; readonly key: string };
}

/**
 * Handles the staged jobs of one name; declare it as a provider class with
 * `@IdempotencyJobHandler(name)`.
 */
export interface IdempotencyJobHandlerInstance<Args = unknown> {
  /**
   * Delivers one job. Resolving means delivered: the job row is deleted in the drainer's
   * transaction, which commits after this returns. Throwing means failed: the job is retried
   * with backoff and, after `jobs.maxAttempts`, kept as dead.
   *
   * @param job - the job
   * @param manager - the drainer's transaction (under a savepoint for this job): writes made
   *   through it commit exactly when the job's deletion does, so they happen once
   */
  handle(job: StagedJob<Args>, manager: EntityManager): Promise<void>;
}

/** A job kept for a human after its last failed delivery. */
export interface DeadJob {
  id: string;
  name: string;
  args: unknown;
  key: string;
  attempts: number;
  lastError: string | null;
  origin: { scope: string; key: string };
  createdAt: Date;
  updatedAt: Date;
}
