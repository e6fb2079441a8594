import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { isCommitUnconfirmed } from '../storage/commit-unconfirmed.error';
import type { OutgoingResponse } from '../utils/response-bytes';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import type { IdempotencyExecutionDeps } from './execution-deps';
import type { ExecutionResult } from './execution-result';
import { emitRejected } from './rejected-event';
import type { IdempotencyRun } from './idempotency-run';
import type {
  IdempotencyStoreTransaction,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';

// An execution's store steps that do not depend on its stage, with the events they emit (its
// refusals are in rejected-event.ts).

/** Emits `executed`: the handler ran, and whether its response was stored. */
export function emitExecuted(
  deps: Pick<IdempotencyExecutionDeps, 'events'>,
  run: IdempotencyRun,
  status: number,
  stored: boolean,
): void {
  deps.events.emit({
    type: 'executed',
    scope: run.ref.scope,
    key: run.ref.key,
    status,
    stored,
    attempt: run.identity.attempt,
  });
}

/** Emits `lock_lost` and warns: another instance took the key over before this one was done. */
export function emitLockLost(
  deps: Pick<IdempotencyExecutionDeps, 'events' | 'logger'>,
  run: IdempotencyRun,
  during: 'complete' | 'release',
): void {
  const { scope, key } = run.ref;
  deps.events.emit({ type: 'lock_lost', scope, key, during });
  deps.logger.warn(`Lost the lease of an idempotent request during ${during}`);
}

/** How a key is given back: `retry` lets the next request run; `forget` deletes the record. */
export type ReleaseMode = 'retry' | 'forget';

/** Why an execution ends without its response stored. */
export type ConcludeReason = 'not_final' | 'rejected_before_handler';

/** Why a key is given back, as its `released` event says. */
export type ReleaseReason = ConcludeReason | 'unstorable';

/** Gives the key back (`retry`: to run again; `forget`: deleted) and says so, or that it was lost. */
export async function releaseKey(
  deps: Pick<IdempotencyExecutionDeps, 'store' | 'events' | 'logger'>,
  run: IdempotencyRun,
  mode: ReleaseMode,
  reason: ReleaseReason,
): Promise<void> {
  try {
    if (await deps.store.release(run.ref, mode)) {
      deps.events.emit({ type: 'released', scope: run.ref.scope, key: run.ref.key, reason });
    } else {
      emitLockLost(deps, run, 'release');
    }
  } catch (error) {
    // The lease lapses on its own; a retry then takes the key over.
    deps.events.emit({ type: 'store_error', operation: 'release', error });
  }
}

/** Rolls the handler's transaction back; a failure is reported, not thrown. */
export async function rollbackQuietly(
  deps: Pick<IdempotencyExecutionDeps, 'events'>,
  transaction: IdempotencyStoreTransaction,
): Promise<void> {
  try {
    await transaction.rollback();
  } catch (error) {
    deps.events.emit({ type: 'store_error', operation: 'rollback', error });
  }
}

/**
 * Completes the run in its transaction, which commits when the run still owns the key and rolls
 * back when not; times it for the completion metric.
 * @returns whether the run still owned the key
 */
export async function completeAndCommit(
  deps: Pick<IdempotencyExecutionDeps, 'recordCompletion'>,
  run: IdempotencyRun,
  transaction: IdempotencyStoreTransaction,
  stored: StoredResponse,
  ttlSeconds: number,
): Promise<boolean> {
  let owned: boolean;
  const started = performance.now();
  if (transaction.completeAndCommit) {
    owned = await transaction.completeAndCommit(run.ref, stored, ttlSeconds);
  } else {
    owned = await transaction.complete(run.ref, stored, ttlSeconds);
    if (owned) await transaction.commit();
    else await transaction.rollback();
  }
  deps.recordCompletion?.((performance.now() - started) / 1000, owned);
  return owned;
}

/**
 * The response could not be stored: its client still gets it. Logged loudly, with `executed`
 * saying it was not stored.
 */
export function reportNotStored(
  deps: Pick<IdempotencyExecutionDeps, 'events' | 'logger'>,
  run: IdempotencyRun,
  status: number,
  error: unknown,
): void {
  // The handler ran and its client gets its response; a retry after the lease lapses
  // runs it again. Logged loudly: this is the one window the store cannot close.
  deps.events.emit({ type: 'store_error', operation: 'complete', error });
  deps.logger.error(
    `Could not store the response of an idempotent request (${status}); ` +
      'a retry after the lease lapses will run the handler again',
    error as Error,
  );
  emitExecuted(deps, run, status, false);
}

/**
 * The completion committed but the database did not confirm it (a stalled synchronous standby,
 * `IdempotencyCommitUnconfirmedError`): the record stands, so nothing is rolled back or
 * released, and its answer is not sent as a final one. The retry replays it, or runs once where
 * a failover lost it.
 */
export function notConfirmed(
  deps: Pick<IdempotencyExecutionDeps, 'events'>,
  run: IdempotencyRun,
  route: Pick<ResolvedIdempotencyRouteOptions, 'retryAfterSeconds'>,
  error: unknown,
): ExecutionResult {
  deps.events.emit({ type: 'store_error', operation: 'complete', error });
  const problem = IdempotencyProblemException.notConfirmed(route.retryAfterSeconds);
  emitRejected(deps.events, problem, run.ref);
  return { kind: 'refused', problem };
}

/**
 * What a failed completion outside a transaction ends in: a refusal when it committed without
 * confirmation (`notConfirmed`), else the handler's answer, not stored (`reportNotStored`).
 */
export function notStored(
  deps: Pick<IdempotencyExecutionDeps, 'events' | 'logger'>,
  run: IdempotencyRun,
  route: Pick<ResolvedIdempotencyRouteOptions, 'retryAfterSeconds'>,
  outgoing: OutgoingResponse,
  error: unknown,
): ExecutionResult {
  if (isCommitUnconfirmed(error)) return notConfirmed(deps, run, route, error);
  reportNotStored(deps, run, outgoing.status, error);
  return { kind: 'stored', answer: outgoing };
}

/** The store's `complete()`, a synchronous throw turned into a rejection. */
export function completeRun(
  deps: Pick<IdempotencyExecutionDeps, 'store'>,
  run: IdempotencyRun,
  stored: StoredResponse,
  ttlSeconds: number,
): Promise<boolean> {
  try {
    return deps.store.complete(run.ref, stored, ttlSeconds);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The response could not be written: Nest's adapter answered 500 instead. */
export function reportWriteFailed(
  deps: Pick<IdempotencyExecutionDeps, 'logger'>,
  error: unknown,
): void {
  deps.logger.error(
    'Could not write the response of an idempotent request; the client got a 500',
    error as Error,
  );
}
