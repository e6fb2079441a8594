import { AsyncLocalStorage } from 'node:async_hooks';
import type { IdempotencyRun } from '../execution/idempotency-run';

/** What the code running under a claimed record (a handler, an operation's steps) can reach. */
export interface IdempotencyRunScope {
  /** The run that owns the record. */
  readonly run: IdempotencyRun;
  /** The transaction's ORM handle on `transactional: true` routes. */
  manager?: unknown;
  /** Set when a request's handler body starts (after guards, interceptors and pipes). */
  handlerStarted: boolean;
}

/** Carries `IdempotencyRunScope` through the handler's (or the completer's) async calls. Internal. */
export const idempotencyRunStorage = new AsyncLocalStorage<IdempotencyRunScope>();
