import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import type { LatencySummary } from './latency-stats';
import { LatencyRecorder } from './latency-stats';

/** Which Idempotency-Key each request carries. */
export type KeyMode =
  /** no header */
  | { kind: 'none' }
  /** a new key on every request (first executions) */
  | { kind: 'fresh'; prefix?: string }
  /** the same key on every request (replays) */
  | { kind: 'fixed'; key: string };

/** One request of the sequence each connection cycles through. */
export interface LoadRoute {
  path: string;
  key: KeyMode;
}

/** One autocannon run. */
export interface LoadSpec {
  /** `http://host:port` of the server. */
  url: string;
  /** Requests each connection sends in turn (usually one). */
  routes: LoadRoute[];
  connections: number;
  /** Seconds to run; ignored when `amount` is set. */
  durationSeconds?: number;
  /** Total requests to send, instead of a duration. */
  amount?: number;
  /** JSON body of every request. */
  body: unknown;
  /** Record latencies from the start (default true); see `RunningLoad.setRecording`. */
  recordFromStart?: boolean;
}

/** What a run measured, over the time it was recording. */
export interface LoadResult {
  /** Responses received while recording. */
  responses: number;
  /** Seconds spent recording. */
  seconds: number;
  /** Responses per second while recording. */
  rps: number;
  latency: LatencySummary;
  /** Responses by status code, while recording. */
  statuses: Record<string, number>;
  /** Connection errors and timeouts over the whole run (autocannon's count). */
  errors: number;
  timeouts: number;
}

/** A run under way. */
export interface RunningLoad {
  /** Turns latency and status recording on or off (to measure a window of a longer run). */
  setRecording(on: boolean): void;
  /** Ends the run early; `done` then resolves. */
  stop(): void;
  done: Promise<LoadResult>;
}

function toRequest(route: LoadRoute, body: unknown): autocannon.Request {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (route.key.kind === 'fixed') headers['idempotency-key'] = route.key.key;
  const request: autocannon.Request = {
    method: 'POST',
    path: route.path,
    headers,
    body: JSON.stringify(body),
  };
  if (route.key.kind === 'fresh') {
    const prefix = `${route.key.prefix ?? 'k'}-${randomBytes(6).toString('hex')}`;
    let sequence = 0;
    request.setupRequest = (next) => {
      next.headers = { ...next.headers, 'idempotency-key': `${prefix}-${++sequence}` };
      return next;
    };
  }
  return request;
}

/**
 * Starts autocannon on one or more routes. Latencies come from autocannon's `response` event (fractional
 * milliseconds) and are summarised exactly, rather than from its integer-millisecond histogram.
 * With `key.kind === 'fresh'`, `setupRequest` sets a new Idempotency-Key on every request.
 */
export function startLoad(spec: LoadSpec): RunningLoad {
  const recorder = new LatencyRecorder();
  const statuses: Record<string, number> = {};
  let recording = spec.recordFromStart !== false;
  let recordedMs = 0;
  let since = recording ? performance.now() : 0;

  let settle!: (error: unknown, result: autocannon.Result | undefined) => void;
  const finished = new Promise<autocannon.Result>((resolve, reject) => {
    settle = (error, result) => (error || !result ? reject(error) : resolve(result));
  });
  const instance = autocannon(
    {
      url: spec.url,
      connections: spec.connections,
      ...(spec.amount ? { amount: spec.amount } : { duration: spec.durationSeconds ?? 10 }),
      timeout: 30,
      requests: spec.routes.map((route) => toRequest(route, spec.body)),
    },
    (error, result) => settle(error, result),
  );
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (!recording) return;
    recorder.record(responseTime);
    statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
  });

  const setRecording = (on: boolean) => {
    if (on === recording) return;
    if (on) since = performance.now();
    else recordedMs += performance.now() - since;
    recording = on;
  };

  const done = finished.then((result): LoadResult => {
    setRecording(false);
    const seconds = recordedMs / 1000;
    return {
      responses: recorder.count,
      seconds,
      rps: seconds > 0 ? recorder.count / seconds : 0,
      latency: recorder.summary(),
      statuses,
      errors: result.errors,
      timeouts: result.timeouts,
    };
  });
  return { setRecording, stop: () => instance.stop(), done };
}

/** Runs `startLoad(spec)` to the end. */
export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return startLoad(spec).done;
}

/** Responses by status over several runs: each status's counts added up. */
export function summedStatuses(
  runs: readonly { statuses: Record<string, number> }[],
): Record<string, number> {
  const statuses: Record<string, number> = {};
  for (const run of runs) {
    for (const [status, count] of Object.entries(run.statuses)) {
      statuses[status] = (statuses[status] ?? 0) + count;
    }
  }
  return statuses;
}
