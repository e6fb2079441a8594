import { AsyncLocalStorage } from 'node:async_hooks';
import type { LeaseHeartbeat } from '../execution/lease-heartbeat';
import type { IdempotencyRecordRef } from '../interfaces/idempotency-record.interface';
import type { OperationRunResult } from '../phases/operation-runner';

/** What an operation in phases needs from the run that owns the record, and how it ended. */
export interface OperationRunSlot {
  ref: IdempotencyRecordRef;
  lease: LeaseHeartbeat;
  ttlSeconds: number;
  replayHeaders: readonly string[];
  /** Whether the route is `transactional: true` (operations refuse to run there). */
  transactional: boolean;
  /** Set when an operation ran: the execution then stores nothing and releases nothing. */
  concluded?: OperationRunResult;
}

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
  /** For operations in phases run by this request (or by the completer). */
  operationRun?: OperationRunSlot;
}

/** Carries `IdempotencyRequestState` through the handler's async calls. Internal. */
export const idempotencyRequestStorage = new AsyncLocalStorage<IdempotencyRequestState>();
