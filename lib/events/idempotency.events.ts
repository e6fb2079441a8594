import { Injectable, Logger } from '@nestjs/common';
import type { IdempotencyErrorCode } from '../errors/idempotency-problem.exception';

/**
 * Something the library did, for logs and metrics. Events of a request carry `route`, the route
 * it matched as `METHOD /pattern` (e.g. `POST /payments/:id`); events of background work (the
 * purge, the completer) do not.
 */
export type IdempotencyEvent =
  | {
      type: 'executed';
      scope: string;
      key: string;
      status: number;
      stored: boolean;
      attempt: number;
      route?: string;
    }
  | { type: 'replayed'; scope: string; key: string; status: number; route?: string }
  | {
      type: 'rejected';
      scope?: string;
      key?: string;
      code: IdempotencyErrorCode;
      status: number;
      route?: string;
    }
  | {
      type: 'released';
      scope: string;
      key: string;
      reason: 'not_final' | 'rejected_before_handler' | 'unstorable' | 'abandoned' | 'retry_later';
      route?: string;
    }
  | {
      type: 'lock_lost';
      scope: string;
      key: string;
      during: 'renew' | 'complete' | 'release';
      route?: string;
    }
  | { type: 'purged'; count: number; durationMs: number }
  /** An operation in phases reached a recovery point (a step committed). */
  | {
      type: 'operation_advanced';
      scope: string;
      key: string;
      operation: string;
      recoveryPoint: string;
    }
  /** An operation in phases stored its final response. */
  | { type: 'operation_finished'; scope: string; key: string; operation: string; status: number }
  /**
   * An unfinished operation was handed to a human: older than `maxAgeSeconds`
   * (`max_age`), or past its TTL when the purge ran (`expired`). See `listAbandoned()`.
   */
  | {
      type: 'operation_abandoned';
      scope: string;
      key: string;
      operation: string;
      recoveryPoint: string | null;
      /**
       * `max_age`: too old to resume; `expired`: past its TTL when the purge ran;
       * `unrecordable`: a foreign step's outcome could not be stored, so it is not called again.
       */
      reason: 'max_age' | 'expired' | 'unrecordable';
    }
  /** The completer took over an unfinished operation, and how its run ended. */
  | {
      type: 'operation_completed_by_completer';
      scope: string;
      key: string;
      operation: string;
      outcome: 'completed' | 'released' | 'lost' | 'abandoned' | 'failed';
    }
  /** A staged job was delivered to its handler (its deletion commits next). */
  | { type: 'job_delivered'; id: string; name: string; key: string; attempt: number }
  /** A delivery failed; the job is retried later, or is now dead (see `listDeadJobs()`). */
  | {
      type: 'job_failed';
      id: string;
      name: string;
      key: string;
      attempt: number;
      dead: boolean;
      error: unknown;
    }
  | { type: 'store_error'; operation: string; error: unknown; route?: string };

/** Listener of `IdempotencyEvents`. */
export type IdempotencyEventListener = (event: IdempotencyEvent) => void;

/**
 * Publishes what the library did. Listeners run synchronously and must not throw (a throwing
 * listener is logged and ignored; it never changes the response).
 *
 * @example
 * app.get(IdempotencyEvents).subscribe((e) => e.type === 'replayed' && metrics.inc('replays'));
 */
@Injectable()
export class IdempotencyEvents {
  private readonly listeners = new Set<IdempotencyEventListener>();
  private readonly logger = new Logger('Idempotency');

  /**
   * @param listener - called with every event
   * @returns a function that unsubscribes
   */
  subscribe(listener: IdempotencyEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Delivers one event to every listener. */
  emit(event: IdempotencyEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.logger.error(`An IdempotencyEvents listener threw on "${event.type}"`, err as Error);
      }
    }
  }
}
