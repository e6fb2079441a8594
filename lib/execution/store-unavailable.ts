import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyEvent, IdempotencyEvents } from '../events/idempotency.events';

/** A failed store call, as its `store_error` event names it. */
export type StoreFailure = Omit<Extract<IdempotencyEvent, { type: 'store_error' }>, 'type'>;

/**
 * The store could not be reached, so nothing more runs: a `store_error` event carries what it
 * threw, and the client is told to retry (503 `idempotency_store_unavailable` with
 * `Retry-After`). The one fail-closed answer of a claim, a begun run, a transactional handler
 * and a step of an operation in phases.
 * @returns the refusal, to be thrown
 */
export function storeUnavailable(
  events: Pick<IdempotencyEvents, 'emit'>,
  failure: StoreFailure,
  retryAfterSeconds: number,
): IdempotencyProblemException {
  events.emit({ type: 'store_error', ...failure });
  return IdempotencyProblemException.storeUnavailable(retryAfterSeconds);
}
