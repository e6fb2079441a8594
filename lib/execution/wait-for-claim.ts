import type { ServerResponse } from 'node:http';
import type { IdempotencyEvent, IdempotencyEvents } from '../events/idempotency.events';
import { omittedBodyOf } from './stored-response';
import type { IdempotencyWaitOptions } from '../interfaces/idempotency-module-options.interface';
import type { ClaimResult } from '../interfaces/idempotency-record.interface';
import type { IdempotencyWaiters, WaitEnd } from '../waiting/idempotency-waiters';
import { preferredWaitSeconds } from '../waiting/prefer-wait';
import { wakeTokenOf } from '../waiting/wake-token';

/**
 * How long a request may wait for a key in flight: its `Prefer: wait=N`, or the route's
 * `defaultSeconds` without one, capped by `maxSeconds`.
 * @returns the seconds, and whether the request asked for them (then `Preference-Applied` says
 *   what it got)
 */
export function waitBudgetOf(
  prefer: string | string[] | undefined,
  wait: IdempotencyWaitOptions,
): { seconds: number; preferred: boolean } {
  const asked = preferredWaitSeconds(prefer);
  const seconds = Math.min(asked ?? wait.defaultSeconds, wait.maxSeconds);
  return { seconds, preferred: asked !== undefined };
}

/** The request a wait is for: its key, and its route for the `waited` event. */
export interface WaitingRequest {
  /** The adapter's request (its `Prefer` header is read). */
  request: any;
  /** The Node.js response under the adapter's: its `close` before the answer is a hang-up. */
  nodeResponse?: ServerResponse;
  /** Sets a header on the answer to come (`Preference-Applied`), through the HTTP adapter. */
  setHeader(name: string, value: string): void;
  /** Caller identity the key belongs to. */
  scope: string;
  /** The idempotency key. */
  key: string;
  /** The route, as `METHOD /pattern`. */
  route: string;
}

type WaitOutcome = Extract<IdempotencyEvent, { type: 'waited' }>['outcome'];

/**
 * Claims the key through `attempt`; while the claim finds it in flight, waits for a wake-up (up
 * to the request's budget) and claims again, and once more when the budget runs out (no poll
 * may come within the wait), so a duplicate gets the first request's stored answer, or, after
 * a release, claims the key itself and runs the handler as a retry would. A request whose
 * client hangs up stops waiting (and claims nothing more). An answer given after
 * a wait that the request asked for carries `Preference-Applied: wait=<seconds>` (RFC 7240).
 * A request that waited, or was refused a wait, emits one `waited` event saying how it ended.
 *
 * @param attempt - one claim of the key
 * @returns the last claim's result: `in_flight` still when the wait ran out, the client left,
 *   `maxWaiters` requests were waiting already, or the application shuts down
 * @throws what `attempt` throws (a store failure)
 */
export async function claimOrWait<T extends ClaimResult>(
  waiters: IdempotencyWaiters,
  events: IdempotencyEvents,
  wait: IdempotencyWaitOptions,
  { request, nodeResponse, setHeader, scope, key, route }: WaitingRequest,
  attempt: () => Promise<T>,
): Promise<T> {
  waiters.prepare();
  const { seconds, preferred } = waitBudgetOf(request.headers?.prefer, wait);
  if (!(seconds > 0)) return attempt();
  const deadline = performance.now() + seconds * 1000;
  const watch = waiters.watch(wakeTokenOf(scope, key));
  let gone = false;
  const stopListening = onHangUp(nodeResponse, () => {
    gone = true;
    watch.wake('gone');
  });
  let since: number | undefined;
  let end: WaitEnd = 'timeout';
  let reported = false;
  // Once per request that waited (or was refused a wait), however it ended.
  const report = (outcome: WaitOutcome) => {
    if (reported || since === undefined || (!watch.waited && end !== 'full')) return;
    reported = true;
    const waitedMs = Math.round(performance.now() - since);
    events.emit({ type: 'waited', scope, key, outcome, waitedMs, route });
  };
  try {
    let result = await attempt();
    since = performance.now();
    while (result.outcome === 'in_flight' && !gone) {
      const left = deadline - performance.now();
      if (left <= 0) {
        end = 'timeout';
        break;
      }
      end = await watch.sleep(left, wait.pollIntervalSeconds * 1000);
      if ((end !== 'woken' && end !== 'timeout') || gone) break;
      // At the deadline, one last look: a poll (or a lost wake-up) may not have come in time.
      result = await attempt();
      if (end === 'timeout') break;
    }
    report(gone && result.outcome === 'in_flight' ? 'client_gone' : outcomeOf(result, end));
    if (watch.waited) {
      // The key settled: the other waiters of the key here look again too (after a poll, only
      // this one did).
      if (result.outcome !== 'in_flight') waiters.settled(watch.token);
      if (preferred) setHeader('preference-applied', `wait=${Math.ceil(seconds)}`);
    }
    return result;
  } catch (error) {
    report('error');
    throw error;
  } finally {
    stopListening();
    watch.end();
  }
}

/** How a wait that found the key still in flight ended, by why its last sleep ended. */
const IN_FLIGHT_OUTCOMES: Partial<Record<WaitEnd, WaitOutcome>> = {
  full: 'refused',
  gone: 'client_gone',
  closed: 'shutdown',
};

/** How a wait ended, from the last claim's result and why the last sleep ended. */
function outcomeOf(result: ClaimResult, end: WaitEnd): WaitOutcome {
  switch (result.outcome) {
    case 'claimed':
      return 'claimed';
    case 'completed':
      return omittedBodyOf(result.response) ? 'rejected' : 'replayed';
    case 'mismatch':
    case 'abandoned':
      return 'rejected';
  }
  return IN_FLIGHT_OUTCOMES[end] ?? 'timed_out';
}

/**
 * Calls `gone` once if the client closes the connection before the response is written.
 * @returns a function that stops listening
 */
function onHangUp(raw: ServerResponse | undefined, gone: () => void): () => void {
  if (typeof raw?.once !== 'function') return () => undefined;
  const closed = () => {
    if (!raw.writableFinished) gone();
  };
  if (raw.destroyed || raw.socket?.destroyed) {
    gone();
    return () => undefined;
  }
  raw.once('close', closed);
  return () => raw.removeListener('close', closed);
}
