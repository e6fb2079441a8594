import { IdempotencyError } from '../config/idempotency-configuration.error';

/**
 * A store commit that stands on the database but that the database did not confirm as safe:
 * PostgreSQL with synchronous replication warns (SQLSTATE 01000) when a commit's wait for its
 * standby is cancelled, and the commit may then be lost by a failover to that standby. Nothing
 * is to be rolled back or released, and what the commit stored is no final answer yet: the
 * client is told to retry (503), and the retry replays it, or runs once where it was lost.
 * See docs/running-in-production.md, "A standby that stalls".
 */
export class IdempotencyCommitUnconfirmedError extends IdempotencyError {
  /**
   * @param operation - the store call whose commit was not confirmed, e.g. `complete`
   * @param warning - the database's warning, as it sent it
   */
  constructor(
    readonly operation: string,
    readonly warning: string,
  ) {
    super(`nest-idempotency: ${operation} committed without confirmation: ${warning}`);
  }
}

/** Whether `error` is a commit that stands but was not confirmed (`IdempotencyCommitUnconfirmedError`). */
export function isCommitUnconfirmed(error: unknown): error is IdempotencyCommitUnconfirmedError {
  return error instanceof IdempotencyCommitUnconfirmedError;
}
