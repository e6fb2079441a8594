import { request } from 'node:http';
import type { Agent } from 'node:http';

/** One answered request. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Milliseconds from writing the request to the end of the response. */
  ms: number;
  /** `performance.now()` at the end of the response (add `performance.timeOrigin` for epoch ms). */
  endedAt: number;
}

/** What to send. */
export interface HttpCall {
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Keep-alive agent to reuse connections; a fresh connection per request without one. */
  agent?: Agent;
}

/**
 * Sends one request with node:http and times it with `performance.now()` (sub-millisecond,
 * unlike autocannon's integer histogram).
 *
 * @param baseUrl - `http://host:port`
 */
export function httpRequest(baseUrl: string, call: HttpCall): Promise<HttpAnswer> {
  const payload = call.body === undefined ? undefined : Buffer.from(JSON.stringify(call.body));
  const url = new URL(call.path, baseUrl);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(
      url,
      {
        method: call.method,
        agent: call.agent,
        headers: {
          ...(payload
            ? { 'content-type': 'application/json', 'content-length': payload.length }
            : {}),
          ...call.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const endedAt = performance.now();
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            ms: endedAt - started,
            endedAt,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * Like `httpRequest`, and parses a JSON body.
 * @throws Error when the status is not 2xx
 */
export async function httpJson<T>(baseUrl: string, call: HttpCall): Promise<T> {
  const answer = await httpRequest(baseUrl, call);
  if (answer.status < 200 || answer.status > 299) {
    throw new Error(`${call.method} ${call.path}: ${answer.status} ${answer.body.slice(0, 300)}`);
  }
  return JSON.parse(answer.body) as T;
}
