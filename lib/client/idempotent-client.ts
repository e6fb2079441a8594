import { backoffCeiling, fullJitter, isRetryableAnswer, parseRetryAfter } from './retry-policy';
import { DEFAULT_IDEMPOTENT_CLIENT_OPTIONS } from './idempotent-client.options';
import type { IdempotentClientOptions, IdempotentRetry } from './idempotent-client.options';
import { IdempotentRequestError } from './idempotent-request.error';
import type { IdempotentRequest, IdempotentResponse } from './idempotent-request';
import { encodeRequestBody } from './request-body';
import { mergeHeaders, operationKey } from './request-headers';

/** A client made by `createIdempotentClient()`. */
export interface IdempotentClient {
  /**
   * Sends one logical operation: one key, reused on every attempt, retried on network errors,
   * attempt timeouts and retryable answers (`isRetryableAnswer`) with full-jitter backoff and
   * `Retry-After`, until a final answer, `retries`, the deadline or `signal`.
   *
   * @returns the final answer (a 4xx or 5xx too: look at `status`); the last retryable answer
   *   when retries or the deadline run out after one
   * @throws `IdempotentRequestError` when it ends with no answer (the last attempt failed on the
   *   network or timed out); the signal's reason when `signal` aborts it
   */
  request<T = unknown>(request: IdempotentRequest): Promise<IdempotentResponse<T>>;
  /** `request({ ...init, method: 'POST', path, body })`. */
  post<T = unknown>(
    path: string,
    body?: unknown,
    init?: Omit<IdempotentRequest, 'method' | 'path' | 'body'>,
  ): Promise<IdempotentResponse<T>>;
}

/**
 * The least time an attempt is started with before the deadline (or `attemptTimeoutMs` when that
 * is smaller). An attempt with only a few milliseconds left could do nothing but time out, and a
 * timeout turns a retryable answer already in hand into "no answer".
 */
const MIN_ATTEMPT_MS = 100;

type Resolved = Required<Omit<IdempotentClientOptions, 'baseUrl' | 'onRetry' | 'headers'>> &
  Pick<IdempotentClientOptions, 'onRetry' | 'headers'> & { baseUrl: string };

/**
 * A `fetch` wrapper that retries the way an idempotent API expects (see `IdempotentClient`). It
 * has no dependency: Node 20+ and browsers with `fetch` and `AbortSignal.any`.
 *
 * @example
 * const payments = createIdempotentClient({ baseUrl: 'https://api.example.com' });
 * const answer = await payments.post('/payments', { amount: 1999, currency: 'eur' });
 * if (answer.ok) console.log(answer.body, answer.replayed ? '(replayed)' : '');
 */
export function createIdempotentClient(options: IdempotentClientOptions): IdempotentClient {
  const resolved = resolveOptions(options);
  const request = <T>(operation: IdempotentRequest) => send<T>(resolved, operation);
  return {
    request,
    post: (path, body, init) => request({ ...init, method: 'POST', path, body }),
  };
}

function resolveOptions(options: IdempotentClientOptions): Resolved {
  const given = Object.entries(options).filter(([, field]) => field !== undefined);
  const merged = {
    ...DEFAULT_IDEMPOTENT_CLIENT_OPTIONS,
    ...(Object.fromEntries(given) as Partial<IdempotentClientOptions>),
  };
  const counts: [string, number, number][] = [
    ['retries', merged.retries, 0],
    ['attemptTimeoutMs', merged.attemptTimeoutMs, 1],
    ['deadlineMs', merged.deadlineMs, 1],
    ['backoffMs', merged.backoffMs, 0],
    ['maxBackoffMs', merged.maxBackoffMs, 0],
    ['maxRetryAfterMs', merged.maxRetryAfterMs, 0],
  ];
  for (const [name, value, min] of counts) {
    if (!Number.isFinite(value) || value < min) {
      throw new TypeError(
        `createIdempotentClient: ${name} must be a number ≥ ${min}, not ${value}`,
      );
    }
  }
  const fetchFn = merged.fetch ?? globalThis.fetch;
  if (typeof fetchFn !== 'function') {
    throw new TypeError('createIdempotentClient: no global fetch here; pass options.fetch');
  }
  return {
    ...merged,
    baseUrl: String(options.baseUrl).replace(/\/+$/, ''),
    fetch: fetchFn,
    random: merged.random ?? Math.random,
    generateKey: merged.generateKey ?? (() => globalThis.crypto.randomUUID()),
  };
}

/** What every attempt of an operation sends: its key, URL, encoded body and headers. */
async function requestOf(o: Resolved, operation: IdempotentRequest) {
  const idempotencyKey = operationKey(
    operation.idempotencyKey,
    operation.headers,
    o.keyHeader,
    o.generateKey,
  );
  const url = `${o.baseUrl}/${operation.path.replace(/^\/+/, '')}`;
  const { payload, contentType } = await encodeRequestBody(operation.body);
  const headers = mergeHeaders(
    contentType ? { 'content-type': contentType } : undefined,
    o.headers,
    operation.headers,
    { [o.keyHeader]: idempotencyKey },
  );
  return { idempotencyKey, url, payload, headers };
}

async function send<T>(o: Resolved, operation: IdempotentRequest): Promise<IdempotentResponse<T>> {
  const { signal } = operation;
  signal?.throwIfAborted();
  const { idempotencyKey, url, payload, headers } = await requestOf(o, operation);
  const deadline = Date.now() + o.deadlineMs;
  let last: IdempotentResponse<T> | undefined;
  let lastError: unknown;

  for (let attempt = 1; ; attempt++) {
    const remaining = deadline - Date.now();
    const attemptTimeout = AbortSignal.timeout(
      Math.max(1, Math.min(o.attemptTimeoutMs, remaining)),
    );
    let retry: Omit<IdempotentRetry, 'delayMs' | 'retryAfter' | 'backoffCeilingMs'>;
    let retryAfterMs: number | undefined;
    try {
      const response = await o.fetch(url, {
        method: operation.method ?? 'POST',
        headers,
        body: payload,
        signal: signal ? AbortSignal.any([signal, attemptTimeout]) : attemptTimeout,
      });
      const answer: IdempotentResponse<T> = {
        status: response.status,
        ok: response.ok,
        headers: response.headers,
        body: parseBody(response.headers.get('content-type'), await response.text()) as T,
        replayed: response.headers.get(o.replayedHeader) === 'true',
        attempts: attempt,
        idempotencyKey,
      };
      if (!isRetryableAnswer(answer.status, answer.body)) return answer;
      last = answer;
      retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
      retry = { idempotencyKey, attempt, reason: 'status', status: answer.status };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      // No answer: whether the server acted is unknown, so an earlier answer no longer stands.
      last = undefined;
      lastError = error;
      const reason = attemptTimeout.aborted ? 'timeout' : 'network';
      retry = { idempotencyKey, attempt, reason, error };
    }

    const ceiling = backoffCeiling(attempt, o.backoffMs, o.maxBackoffMs);
    const jittered = fullJitter(ceiling, o.random);
    const honoured = retryAfterMs !== undefined && retryAfterMs >= jittered;
    const delayMs = honoured ? retryAfterMs! : jittered;
    const tooLong = retryAfterMs !== undefined && retryAfterMs > o.maxRetryAfterMs;
    const leftAfterWait = deadline - (Date.now() + delayMs);
    if (
      attempt > o.retries ||
      tooLong ||
      leftAfterWait < Math.min(MIN_ATTEMPT_MS, o.attemptTimeoutMs)
    ) {
      if (last) return last;
      const why = attempt > o.retries ? `${attempt} attempts` : 'the deadline';
      throw new IdempotentRequestError(
        `No answer to ${operation.method ?? 'POST'} ${operation.path} after ${why}` +
          `${lastError instanceof Error ? ` (last: ${lastError.message})` : ''}; retry later ` +
          'with the same idempotency key and body',
        idempotencyKey,
        attempt,
        { cause: lastError },
      );
    }
    o.onRetry?.({
      ...retry,
      delayMs,
      retryAfter: honoured,
      backoffCeilingMs: honoured ? 0 : ceiling,
    });
    await sleep(delayMs, signal);
  }
}

/** JSON when the content type says so (and it parses), the text otherwise. */
function parseBody(contentType: string | null, text: string): unknown {
  if (!contentType || !/^application\/([\w.-]+\+)?json\b/i.test(contentType)) return text;
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return text;
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
