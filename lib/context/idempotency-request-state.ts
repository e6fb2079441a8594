import { AsyncLocalStorage } from 'node:async_hooks';

/** What the library knows about the request whose handler is running. */
export interface IdempotencyRequestState {
  scope: string;
  key: string;
  recordId: string;
  fingerprint: string;
  attempt: number;
  /** The transaction's ORM handle on `transactional: true` routes. */
  manager?: unknown;
  /** Set when the handler body starts (after guards, interceptors and pipes). */
  handlerStarted: boolean;
}

/** Carries `IdempotencyRequestState` through the handler's async calls. Internal. */
export const idempotencyRequestStorage = new AsyncLocalStorage<IdempotencyRequestState>();
