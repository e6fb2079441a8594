import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyEvents } from '../events/idempotency.events';

/** Where a refusal happened, as its `rejected` event names it. */
export interface RejectedAt {
  /** The route, as `METHOD /pattern`; left to the emitter when it names the route itself. */
  route?: string;
  scope?: string;
  key?: string;
}

/**
 * Emits the `rejected` event of a refusal: the one place the library builds it, whichever part
 * refused (a key, a scope or a fingerprint the runner refused, a claim, a completion that could
 * not commit).
 * @returns the refusal, to be thrown or rendered
 */
export function emitRejected(
  events: Pick<IdempotencyEvents, 'emit'>,
  problem: IdempotencyProblemException,
  at: RejectedAt,
): IdempotencyProblemException {
  const { route, scope, key } = at;
  const { code } = problem;
  events.emit({ type: 'rejected', scope, key, code, status: problem.getStatus(), route });
  return problem;
}
