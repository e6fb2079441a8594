import { isCommitUnconfirmed } from '../commit-unconfirmed.error';
import { isDatabaseUnavailable } from './database-unavailable';
import type { PreparedStatement, StatementResult } from './prepared-statement';
import { writtenOf } from './record-rows';
import type { RecordStatementName } from './record-statements.sql';
import { Deadline, isStoreTimeout } from './with-deadline';

/** The pause before the first attempt again; each later pause doubles it, up to the longest. */
const FIRST_PAUSE_MS = 50;
const LONGEST_PAUSE_MS = 500;

/**
 * Whether a completion that failed so is sent again: its connection failed or could not be
 * made (the database went away, a failover moves it), as opposed to a statement PostgreSQL
 * refused (an ERROR), a call that ran out of time, whose statement may still be pending, or a
 * commit that stands but was not confirmed by the standby (sent again, it would hide that).
 */
function isCompletionRetryable(error: unknown): boolean {
  return isDatabaseUnavailable(error) && !isStoreTimeout(error) && !isCommitUnconfirmed(error);
}

/**
 * What becomes of a completion that failed: when its connection failed, it is sent again as
 * `completeAgain`, which also counts a record this owner already completed with the same
 * response (the first may have committed); otherwise undefined. It goes on a fresh connection
 * each time, after pauses that double (to half a second), until one gets an answer or the
 * store's timeout, counted from the failure, runs out: a failover's new primary takes a few
 * seconds to take writes.
 * @param announced - whether the completion announces itself (its values end with the wake
 *   token): it is sent again as `completeAgainAnnounced`
 * @param run - sends the statement with the completion's values within `deadline`
 * @returns whether the first attempt that got an answer completed the record
 * @throws the last attempt's error when it was not a connection error, or when the time ran out
 */
export function recoverCompletion(
  error: unknown,
  announced: boolean,
  sql: Record<RecordStatementName, PreparedStatement>,
  timeoutMs: number,
  run: (deadline: Deadline, statement: PreparedStatement) => Promise<StatementResult>,
): Promise<boolean> | undefined {
  if (!isCompletionRetryable(error)) return undefined;
  const statement = announced ? sql.completeAgainAnnounced : sql.completeAgain;
  const deadline = new Deadline('complete (again)', timeoutMs);
  const sendAgain = async (failure: unknown): Promise<boolean> => {
    for (
      let pauseMs = FIRST_PAUSE_MS;
      deadline.remainingMs() > pauseMs;
      pauseMs = Math.min(pauseMs * 2, LONGEST_PAUSE_MS)
    ) {
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      try {
        return writtenOf(await run(deadline, statement), announced);
      } catch (next) {
        if (!isCompletionRetryable(next)) throw next;
        failure = next;
      }
    }
    throw failure;
  };
  return sendAgain(error);
}
