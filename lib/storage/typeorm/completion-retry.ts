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
export function isCompletionRetryable(error: unknown): boolean {
  return isDatabaseUnavailable(error) && !isStoreTimeout(error) && !isCommitUnconfirmed(error);
}

/**
 * Sends a completion again after its connection failed, on a fresh connection each time, after
 * pauses that double (to half a second), until one gets an answer or the store's timeout, counted from the failure,
 * runs out: a failover's new primary takes a few seconds to take writes. Only the way that
 * failed reaches here.
 * @param send - sends the completion's `completeAgain` statement within `deadline`
 * @param timeoutMs - the store's timeout
 * @param failure - the error of the attempt that failed
 * @returns the answer of the first attempt that got one
 * @throws the last attempt's error when it was not a connection error, or when the time ran out
 */
export async function sendCompletionAgain(
  send: (deadline: Deadline) => Promise<StatementResult>,
  timeoutMs: number,
  failure: unknown,
): Promise<StatementResult> {
  const deadline = new Deadline('complete (again)', timeoutMs);
  let error = failure;
  for (
    let pauseMs = FIRST_PAUSE_MS;
    deadline.remainingMs() > pauseMs;
    pauseMs = Math.min(pauseMs * 2, LONGEST_PAUSE_MS)
  ) {
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    try {
      return await send(deadline);
    } catch (next) {
      if (!isCompletionRetryable(next)) throw next;
      error = next;
    }
  }
  throw error;
}

/**
 * What becomes of a completion that failed: when its connection failed, it is sent again
 * (`sendCompletionAgain`) as `completeAgain`, which also counts a record this owner already
 * completed with the same response (the first may have committed); otherwise undefined.
 * @param announced - whether the completion announces itself (its values end with the wake
 *   token): it is sent again as `completeAgainAnnounced`
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
  return sendCompletionAgain((deadline) => run(deadline, statement), timeoutMs, error).then(
    (result) => writtenOf(result, announced),
  );
}
