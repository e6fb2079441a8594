import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';

/** What the refusal of a message carries to its caller (an `RpcException`'s error). */
export interface IdempotencyMessageRefusal {
  /** The HTTP status the same refusal has on a route (409 in use, 422 reused, 503 store down). */
  status: number;
  /** The stable code (`idempotency_key_reused`, ...). */
  code: string;
  /** Short summary of the code. */
  title: string;
  /** What went wrong with this message; never contains the key. */
  detail: string;
  /** When to send it again, in seconds, for a refusal a retry can get past (409, 503). */
  retryAfterSeconds?: number;
}

/**
 * A refusal as a message's caller reads it: the problem's status, code, title and detail (which
 * say where the message keeps its key), and when to send it again.
 * @param problem - the library's refusal
 */
export function messageRefusal(problem: IdempotencyProblemException): IdempotencyMessageRefusal {
  const { title, detail, code, retryAfterSeconds } = problem;
  const retry = retryAfterSeconds !== undefined ? { retryAfterSeconds } : {};
  return { status: problem.getStatus(), code, title, detail, ...retry };
}
