import { Injectable, Logger } from '@nestjs/common';
import type { IdempotencyErrorCode } from '../errors/idempotency-error-codes';

/**
 * The key an event of a request or an operation is about.
 * @inline
 */
interface KeyedEvent {
  /** Caller identity the key belongs to (`''` when none). */
  scope: string;
  /** The Idempotency-Key. */
  key: string;
}

/**
 * The route of a request's event.
 * @inline
 */
interface RouteEvent {
  /** The route, as `METHOD /pattern`. */
  route?: string;
}

/**
 * The key and the route of a request's event.
 * @inline
 */
type RequestEvent = KeyedEvent & RouteEvent;

/**
 * The operation in phases an event is about.
 * @inline
 */
interface OperationEvent extends KeyedEvent {
  /** The operation's registered name. */
  operation: string;
}

/**
 * The staged job an event is about.
 * @inline
 */
interface JobEvent {
  /** The job's row id. */
  id: string;
  /** The job handler's name. */
  name: string;
  /** The job's stable key (`StagedJob.key`). */
  key: string;
  /** 1 on the first delivery. */
  attempt: number;
}

/**
 * Something the library did, for logs and metrics. Events of a request carry `route`, the route
 * it matched as `METHOD /pattern` (e.g. `POST /payments/:id`); events of background work (the
 * purge, the completer) do not.
 */
export type IdempotencyEvent =
  /** The handler ran for a claimed key. */
  | ({
      /** Which event this is. */
      type: 'executed';
      /** The handler's response status. */
      status: number;
      /** Whether the response was stored for replays (a final outcome). */
      stored: boolean;
      /** 1 on the first run of the key; more when it runs again after a release or takeover. */
      attempt: number;
    } & RequestEvent)
  /** A stored response was replayed; the handler did not run. */
  | ({
      /** Which event this is. */
      type: 'replayed';
      /** The replayed status. */
      status: number;
    } & RequestEvent)
  /** The request was answered with one of the library's errors (400, 409, 422, 503). */
  | ({
      /** Which event this is. */
      type: 'rejected';
      /** Caller identity, when the key was read far enough to have one. */
      scope?: string;
      /** The Idempotency-Key, when there was a valid one. */
      key?: string;
      /** The error's stable code. */
      code: IdempotencyErrorCode;
      /** The error's HTTP status. */
      status: number;
    } & RouteEvent)
  /**
   * A duplicate found its key in flight on a route with `wait` and waited for the first request,
   * or was refused a wait. Once per such request, before its answer's own event.
   */
  | ({
      /** Which event this is. */
      type: 'waited';
      /**
       * `replayed`: the key completed, its stored response is replayed; `claimed`: the key was
       * given up (or its lease lapsed), the request claimed it and runs the handler;
       * `timed_out`: still in flight when the wait ran out (409); `refused`: `maxWaiters`
       * requests were waiting already (409 at once); `client_gone`: the client hung up;
       * `shutdown`: the application closed; `rejected`: the key settled in a way the request is
       * refused (422, 409 abandoned or not stored); `error`: the store failed (503).
       */
      outcome:
        | 'replayed'
        | 'claimed'
        | 'timed_out'
        | 'refused'
        | 'client_gone'
        | 'shutdown'
        | 'rejected'
        | 'error';
      /** How long the request waited, in milliseconds (0 when refused). */
      waitedMs: number;
    } & RequestEvent)
  /** The key was given up, so a retry can run it again. */
  | ({
      /** Which event this is. */
      type: 'released';
      /**
       * `not_final`: a status outside `storeStatuses`; `rejected_before_handler`: refused before
       * the handler started; `unstorable`: the response could not be stored; `abandoned` and
       * `retry_later`: an operation in phases gave the key up.
       */
      reason: 'not_final' | 'rejected_before_handler' | 'unstorable' | 'abandoned' | 'retry_later';
    } & RequestEvent)
  /** The request's lease was taken over by another caller; its write changed nothing. */
  | ({
      /** Which event this is. */
      type: 'lock_lost';
      /** The store call that found the lease lost. */
      during: 'renew' | 'complete' | 'release';
    } & RequestEvent)
  /** A purge run ended. */
  | {
      /** Which event this is. */
      type: 'purged';
      /** Records deleted. */
      count: number;
      /** How long the run took, in milliseconds. */
      durationMs: number;
    }
  /** An operation in phases reached a recovery point (a step committed). */
  | ({
      /** Which event this is. */
      type: 'operation_advanced';
      /** The recovery point reached: the name of the step that committed. */
      recoveryPoint: string;
    } & OperationEvent)
  /** An operation in phases stored its final response. */
  | ({
      /** Which event this is. */
      type: 'operation_finished';
      /** The stored response's status. */
      status: number;
    } & OperationEvent)
  /**
   * An unfinished operation was handed to a human: older than `maxAgeSeconds`
   * (`max_age`), or past its TTL when the purge ran (`expired`). See `listAbandoned()`.
   */
  | ({
      /** Which event this is. */
      type: 'operation_abandoned';
      /** The last recovery point it reached; `null` before its first step committed. */
      recoveryPoint: string | null;
      /**
       * `max_age`: too old to resume; `expired`: past its TTL when the purge ran;
       * `unrecordable`: a foreign step's outcome could not be stored, so it is not called again.
       */
      reason: 'max_age' | 'expired' | 'unrecordable';
    } & OperationEvent)
  /** The completer took over an unfinished operation, and how its run ended. */
  | ({
      /** Which event this is. */
      type: 'operation_completed_by_completer';
      /** How the completer's run ended. */
      outcome: 'completed' | 'released' | 'lost' | 'abandoned' | 'failed';
    } & OperationEvent)
  /** A staged job was delivered to its handler (its deletion commits next). */
  | ({
      /** Which event this is. */
      type: 'job_delivered';
    } & JobEvent)
  /** A delivery failed; the job is retried later, or is now dead (see `listDeadJobs()`). */
  | ({
      /** Which event this is. */
      type: 'job_failed';
      /** Whether no attempts are left: the job is kept for a human. */
      dead: boolean;
      /** What the handler threw, or the timeout. */
      error: unknown;
    } & JobEvent)
  /**
   * A delivery's commit stands on the primary without its synchronous standby's confirmation
   * (`error`, an `IdempotencyCommitUnconfirmedError`): nothing retries it there, and a failover to
   * a standby that missed it delivers it once more (docs/running-in-production.md).
   */
  | ({
      /** Which event this is. */
      type: 'job_unconfirmed';
      /** What the commit threw. */
      error: unknown;
    } & JobEvent)
  /**
   * An operator changed records through the operator tool (`nest-idempotency/cli`), for the
   * audit trail: emitted once per `release`, `resolve` or `purge`, whatever its result.
   */
  | {
      /** Which event this is. */
      type: 'operator_action';
      /** The command: `release` a stuck key, `resolve` an abandoned operation, `purge` now. */
      action: 'release' | 'resolve' | 'purge';
      /** Caller identity of the key acted on (`release`, `resolve`). */
      scope?: string;
      /** The Idempotency-Key acted on (`release`, `resolve`). */
      key?: string;
      /**
       * `done`: the change was made; `refused`: the record is not in a state the action may
       * change (a live lease, say); `not_found`: no such record; `failed`: the store failed.
       */
      result: 'done' | 'refused' | 'not_found' | 'failed';
      /** Why it was refused or failed, e.g. `lease_live`, `not_in_flight`, the store's error. */
      reason?: string;
      /** For `purge`: how many records were deleted. */
      count?: number;
    }
  /** A store call failed (the request failed closed, or background work retries later). */
  | ({
      /** Which event this is. */
      type: 'store_error';
      /** The call that failed, e.g. `claim`, `complete`, `purge`. */
      operation: string;
      /** What the store threw. */
      error: unknown;
    } & RouteEvent);

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
