import type { IdempotencyWaitOptions } from '../interfaces/idempotency-module-options.interface';
import type { IdempotencyWaiters } from './idempotency-waiters';
import { preferredWaitSeconds } from './prefer-wait';
import { wakeTokenOf } from './wake-token';

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

/**
 * Claims the key through `attempt`; while the claim finds it in flight, waits for a wake-up (up
 * to the request's budget) and claims again, so a duplicate gets the first request's stored
 * answer, or, after a release, claims the key itself and runs the handler as a retry would. A
 * request whose client hangs up stops waiting (and claims nothing more). An answer given after
 * a wait that the request asked for carries `Preference-Applied: wait=<seconds>` (RFC 7240).
 *
 * @param request - the adapter's request (its `Prefer` header is read)
 * @param response - the adapter's response (Express `res` or Fastify `reply`)
 * @param attempt - one claim of the key
 * @returns the last claim's result: `in_flight` still when the wait ran out, the client left,
 *   `maxWaiters` requests were waiting already, or the application shuts down
 */
export async function claimOrWait<T extends { outcome: string }>(
  waiters: IdempotencyWaiters,
  request: any,
  response: any,
  wait: IdempotencyWaitOptions,
  scope: string,
  key: string,
  attempt: () => Promise<T>,
): Promise<T> {
  waiters.prepare();
  const { seconds, preferred } = waitBudgetOf(request.headers?.prefer, wait);
  if (!(seconds > 0)) return attempt();
  const deadline = performance.now() + seconds * 1000;
  const watch = waiters.watch(wakeTokenOf(scope, key));
  let gone = false;
  const stopListening = onHangUp(response, () => {
    gone = true;
    watch.wake('gone');
  });
  try {
    let result = await attempt();
    while (result.outcome === 'in_flight' && !gone) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      if ((await watch.sleep(left, wait.pollIntervalSeconds * 1000)) !== 'woken' || gone) break;
      result = await attempt();
    }
    if (watch.waited) {
      // The key settled: the other waiters of the key here look again too (after a poll, only
      // this one did).
      if (result.outcome !== 'in_flight') waiters.settled(watch.token);
      if (preferred) setHeader(response, 'preference-applied', `wait=${Math.ceil(seconds)}`);
    }
    return result;
  } finally {
    stopListening();
    watch.end();
  }
}

/**
 * Calls `gone` once if the client closes the connection before the response is written.
 * @returns a function that stops listening
 */
function onHangUp(response: any, gone: () => void): () => void {
  const raw = response?.raw ?? response;
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

/** Sets a header on an Express response or a Fastify reply. */
function setHeader(response: any, name: string, value: string): void {
  if (response?.raw && typeof response.header === 'function') response.header(name, value);
  else if (typeof response?.setHeader === 'function' && !response.headersSent) {
    response.setHeader(name, value);
  }
}
