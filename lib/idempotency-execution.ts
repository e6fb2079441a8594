import type { Logger } from '@nestjs/common';
import type { IdempotencyRequestState } from './context/idempotency-request-state';
import { IdempotencyProblemException } from './errors/idempotency-problem.exception';
import type { IdempotencyEvents } from './events/idempotency.events';
import type { IdempotencyRouteOptions } from './interfaces/idempotency-module-options.interface';
import type {
  IdempotencyRecordRef,
  IdempotencyStoreTransaction,
  StoredResponse,
} from './interfaces/idempotency-record.interface';
import type { IdempotencyStore } from './storage/idempotency.store';
import { LeaseHeartbeat } from './utils/lease-heartbeat';
import type { InFlightClaims } from './utils/in-flight-claims';
import type { ReplayCache } from './utils/replay-cache';
import type { OutgoingResponse } from './utils/response-send-hook';

/** Shared services an execution needs. */
export interface ExecutionDeps {
  store: IdempotencyStore;
  events: IdempotencyEvents;
  logger: Logger;
  problemTypeBaseUri: string;
  /** Completed records are cached here once stored, for replays on this instance. */
  replayCache: ReplayCache;
  /** Forgets this execution's key once its record is completed or released. */
  inFlight: InFlightClaims;
  /** Logs once per route that its responses cannot be stored. */
  warnUnstorable: (why: string) => void;
}

/**
 * One claimed request, from the claim to the moment its response is sent: keeps the lease
 * alive, holds the transaction of a transactional route, and decides — from the bytes about to
 * be sent — whether the outcome is stored (SPEC §6) or the key released.
 */
export class IdempotencyExecution {
  /** Set once the handler's result (or error) came back through the interceptor. */
  handlerReturned = false;
  private readonly heartbeat: LeaseHeartbeat;
  private transaction?: IdempotencyStoreTransaction;
  private settled = false;

  constructor(
    readonly ref: IdempotencyRecordRef,
    readonly state: IdempotencyRequestState,
    private readonly route: IdempotencyRouteOptions,
    private readonly deps: ExecutionDeps,
  ) {
    this.heartbeat = new LeaseHeartbeat(
      deps.store,
      ref,
      route.lockTimeoutSeconds,
      route.maxLockHoldSeconds,
      () => this.emitLockLost('renew'),
      (error) => deps.events.emit({ type: 'store_error', operation: 'renew', error }),
    );
  }

  /** Starts the lease heartbeat and, on transactional routes, opens the transaction. */
  async start(): Promise<void> {
    this.heartbeat.start();
    if (this.route.transactional) {
      this.transaction = await this.deps.store.beginTransaction();
      this.state.manager = this.transaction.manager;
    }
  }

  /** The handler threw: its transaction (if any) is rolled back now, before anything is sent. */
  async onHandlerError(): Promise<void> {
    this.handlerReturned = true;
    await this.rollbackTransaction();
  }

  /**
   * Decides what happens to the response about to be sent. Resolves once it is stored (or the
   * key released); resolves to the response to send, or `undefined` to send it untouched.
   */
  async settle(outgoing: OutgoingResponse | undefined): Promise<OutgoingResponse | undefined> {
    if (this.settled) return undefined;
    this.settled = true;
    this.heartbeat.stop();
    try {
      return await this.decide(outgoing);
    } finally {
      this.deps.inFlight.end(this.ref.scope, this.ref.key, this.ref.ownerToken);
    }
  }

  /** The response ended without going through `send` (stream, SSE): release the key. */
  async abandon(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    this.heartbeat.stop();
    this.deps.warnUnstorable('its response does not go through send() (a stream or SSE)');
    try {
      await this.giveUp('retry', 'abandoned');
    } finally {
      this.deps.inFlight.end(this.ref.scope, this.ref.key, this.ref.ownerToken);
    }
  }

  private async decide(
    outgoing: OutgoingResponse | undefined,
  ): Promise<OutgoingResponse | undefined> {
    if (!this.state.handlerStarted) {
      await this.giveUp('forget', 'rejected_before_handler');
      return undefined;
    }
    if (!this.handlerReturned || !outgoing) {
      this.deps.warnUnstorable(
        this.handlerReturned
          ? 'its response is a stream'
          : 'its handler sends the response itself (@Res() without passthrough)',
      );
      await this.giveUp('retry', 'unstorable');
      return undefined;
    }
    if (!this.route.storeStatuses.includes(outgoing.status)) {
      await this.giveUp('retry', 'not_final');
      this.emitExecuted(outgoing.status, false);
      return undefined;
    }
    const stored = this.toStored(outgoing);
    if (this.transaction) return this.completeInTransaction(this.transaction, stored, outgoing);
    try {
      const storedAt = this.deps.replayCache.now();
      const owned = await this.deps.store.complete(this.ref, stored, this.route.ttlSeconds);
      if (owned) this.cache(stored, storedAt);
      else this.emitLockLost('complete');
    } catch (error) {
      // The handler ran and its client gets its response; a retry after the lease lapses runs
      // it again. Logged loudly: this is the one window the store cannot close.
      this.deps.events.emit({ type: 'store_error', operation: 'complete', error });
      this.deps.logger.error(
        `Could not store the response of an idempotent request (${outgoing.status}); ` +
          'a retry after the lease lapses will run the handler again',
        error as Error,
      );
    }
    this.emitExecuted(outgoing.status, true);
    return outgoing;
  }

  private async completeInTransaction(
    transaction: IdempotencyStoreTransaction,
    stored: StoredResponse,
    outgoing: OutgoingResponse,
  ): Promise<OutgoingResponse> {
    try {
      const storedAt = this.deps.replayCache.now();
      const owned = await transaction.complete(this.ref, stored, this.route.ttlSeconds);
      if (!owned) {
        this.transaction = undefined;
        await transaction.rollback();
        this.emitLockLost('complete');
        return this.problem(
          new IdempotencyProblemException(
            'idempotency_key_in_use',
            'This request took longer than its lease and another attempt took it over; its ' +
              'changes were rolled back. Retry with the same key to get the final response.',
            this.route.retryAfterSeconds,
          ),
        );
      }
      this.transaction = undefined;
      await transaction.commit();
      this.cache(stored, storedAt);
    } catch (error) {
      this.deps.events.emit({ type: 'store_error', operation: 'complete', error });
      await this.rollbackTransaction();
      await this.giveUp('retry', 'not_final');
      return this.problem(
        new IdempotencyProblemException(
          'idempotency_store_unavailable',
          'The response could not be stored, so its changes were rolled back. Retry with the same key.',
          this.route.retryAfterSeconds,
        ),
      );
    }
    this.emitExecuted(outgoing.status, true);
    return outgoing;
  }

  /**
   * Caches the record just completed. Its expiry in the store is `ttlSeconds` after a moment
   * later than `storedAt`, so the cached copy never outlives it.
   */
  private cache(stored: StoredResponse, storedAt: number): void {
    this.deps.replayCache.set(
      this.ref.scope,
      this.ref.key,
      { recordId: this.state.recordId, fingerprint: this.state.fingerprint, response: stored },
      storedAt + this.route.ttlSeconds * 1000,
    );
  }

  private toStored(outgoing: OutgoingResponse): StoredResponse {
    const headers: StoredResponse['headers'] = {};
    for (const name of this.route.replayHeaders) {
      const value = outgoing.headers[name];
      if (value !== undefined) headers[name] = value;
    }
    return { status: outgoing.status, headers, body: outgoing.body };
  }

  private problem(exception: IdempotencyProblemException): OutgoingResponse {
    this.deps.events.emit({
      type: 'rejected',
      scope: this.ref.scope,
      key: this.ref.key,
      code: exception.code,
      status: exception.getStatus(),
    });
    return exception.toResponse(this.deps.problemTypeBaseUri);
  }

  private async giveUp(
    mode: 'retry' | 'forget',
    reason: 'not_final' | 'rejected_before_handler' | 'unstorable' | 'abandoned',
  ): Promise<void> {
    await this.rollbackTransaction();
    try {
      const owned = await this.deps.store.release(this.ref, mode);
      if (owned)
        this.deps.events.emit({
          type: 'released',
          scope: this.ref.scope,
          key: this.ref.key,
          reason,
        });
      else this.emitLockLost('release');
    } catch (error) {
      // The lease lapses on its own; a retry then takes the key over.
      this.deps.events.emit({ type: 'store_error', operation: 'release', error });
    }
  }

  private async rollbackTransaction(): Promise<void> {
    const transaction = this.transaction;
    this.transaction = undefined;
    if (!transaction) return;
    try {
      await transaction.rollback();
    } catch (error) {
      this.deps.events.emit({ type: 'store_error', operation: 'rollback', error });
    }
  }

  private emitExecuted(status: number, stored: boolean): void {
    this.deps.events.emit({
      type: 'executed',
      scope: this.ref.scope,
      key: this.ref.key,
      status,
      stored,
      attempt: this.state.attempt,
    });
  }

  private emitLockLost(during: 'renew' | 'complete' | 'release'): void {
    this.deps.events.emit({ type: 'lock_lost', scope: this.ref.scope, key: this.ref.key, during });
    this.deps.logger.warn(`Lost the lease of an idempotent request during ${during}`);
  }
}
