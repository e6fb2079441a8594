/**
 * The retrying client (`nest-idempotency/client`) against a scripted HTTP server on 127.0.0.1:
 * what it retries and what it returns as final, that every attempt carries the same key and the
 * same bytes, Retry-After, full-jitter backoff, attempt timeouts, lost answers, the deadline, the
 * retry budget and cancellation. (Against the sample app behind a lossy proxy:
 * test/e2e/idempotent-client.e2e-spec.ts.)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  IdempotentRequestError,
  createIdempotentClient,
  isRetryableAnswer,
  parseRetryAfter,
} from '../../lib/client';
import type { IdempotentClientOptions, IdempotentRetry } from '../../lib/client';

/** One request the server saw. */
interface Seen {
  method: string;
  key: string | undefined;
  body: string;
  headers: IncomingMessage['headers'];
  at: number;
}

/** What the server does with its n-th request (0-based): answer, or `destroy`/`hang`. */
type Script = (n: number, response: ServerResponse) => void | 'destroy' | 'hang';

let server: Server;
let seen: Seen[];
let script: Script;

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const n = seen.length;
      seen.push({
        method: request.method!,
        key: request.headers['idempotency-key'] as string | undefined,
        body: Buffer.concat(chunks).toString(),
        headers: request.headers,
        at: Date.now(),
      });
      const outcome = script(n, response);
      if (outcome === 'destroy') request.socket.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  seen = [];
});

function client(options: Partial<IdempotentClientOptions> = {}) {
  const { port } = server.address() as AddressInfo;
  return createIdempotentClient({
    baseUrl: `http://127.0.0.1:${port}/`,
    backoffMs: 1,
    maxBackoffMs: 5,
    ...options,
  });
}

function answer(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const problem = typeof body === 'object' && body !== null && 'code' in body;
  response.writeHead(status, {
    'content-type': problem ? 'application/problem+json' : 'application/json',
    ...headers,
  });
  response.end(JSON.stringify(body));
}

const CREATED = { id: 'pay_1' };

describe('createIdempotentClient', () => {
  it.each([
    [200, CREATED],
    [201, CREATED],
    [400, { code: 'idempotency_key_invalid' }],
    [402, { error: 'card_declined' }],
    [404, { message: 'not found' }],
    [409, { code: 'idempotency_operation_abandoned' }],
    [409, { message: 'the application’s own conflict' }],
    [422, { code: 'idempotency_key_reused' }],
    [501, { message: 'not implemented' }],
  ])('returns a %i (%j) as final after one attempt', async (status, body) => {
    script = (_, response) => answer(response, status, body);
    const result = await client().post('/payments', { amount: 1 });
    expect(result).toMatchObject({ status, body, attempts: 1, replayed: false });
    expect(result.ok).toBe(status < 300);
    expect(seen).toHaveLength(1);
  });

  it.each([
    [409, { code: 'idempotency_key_in_use' }],
    [409, { error: { type: 'idempotency_error', code: 'idempotency_key_in_use' } }],
    [408, {}],
    [429, {}],
    [500, {}],
    [502, {}],
    [503, { code: 'idempotency_store_unavailable' }],
    [504, {}],
  ])('retries a %i (%j) with the same key and the same bytes', async (status, body) => {
    script = (n, response) =>
      n < 2 ? answer(response, status, body) : answer(response, 201, CREATED);
    const result = await client().post('/payments', { amount: 1999, currency: 'eur' });
    expect(result).toMatchObject({ status: 201, body: CREATED, attempts: 3 });
    expect(seen).toHaveLength(3);
    expect(new Set(seen.map((s) => s.key))).toEqual(new Set([result.idempotencyKey]));
    expect(new Set(seen.map((s) => s.body))).toEqual(new Set(['{"amount":1999,"currency":"eur"}']));
    expect(seen[0].headers['content-type']).toBe('application/json');
  });

  it('makes a UUID v4 key per operation, or uses the one given', async () => {
    script = (_, response) => answer(response, 201, CREATED);
    const c = client();
    const [a, b] = [await c.post('/payments', {}), await c.post('/payments', {})];
    for (const key of [a.idempotencyKey, b.idempotencyKey]) {
      expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    expect(a.idempotencyKey).not.toBe(b.idempotencyKey);
    const given = await c.post('/payments', {}, { idempotencyKey: 'order-1001' });
    expect(given.idempotencyKey).toBe('order-1001');
    expect(seen.map((s) => s.key)).toEqual([a.idempotencyKey, b.idempotencyKey, 'order-1001']);
  });

  it('sends its headers, the request’s, a string body as it is, and the method asked for', async () => {
    script = (_, response) => answer(response, 200, CREATED);
    await client({ headers: { authorization: 'Bearer t', 'x-a': 'client' } }).request({
      method: 'PUT',
      path: 'payments/1',
      body: 'raw text',
      headers: { 'x-a': 'request', 'content-type': 'text/plain' },
    });
    expect(seen[0]).toMatchObject({ method: 'PUT', body: 'raw text' });
    expect(seen[0].headers).toMatchObject({
      authorization: 'Bearer t',
      'x-a': 'request',
      'content-type': 'text/plain',
    });
  });

  it('merges header names in any case: a request’s header replaces the client’s', async () => {
    script = (_, response) => answer(response, 200, CREATED);
    await client({ headers: { Authorization: 'Bearer client', 'X-Trace': 'c' } }).request({
      method: 'PATCH',
      path: 'payments/1',
      body: { amount: 2000 },
      headers: { authorization: 'Bearer request', 'Content-Type': 'application/merge-patch+json' },
    });
    expect(seen[0].headers).toMatchObject({
      authorization: 'Bearer request',
      'content-type': 'application/merge-patch+json',
      'x-trace': 'c',
    });
    expect(seen[0].body).toBe('{"amount":2000}');
  });

  it.each(['idempotency-key', 'Idempotency-Key', 'IDEMPOTENCY-KEY'])(
    'uses a request’s own %s header as the key, on every attempt',
    async (name) => {
      script = (n, response) =>
        n === 0 ? answer(response, 503, {}) : answer(response, 201, CREATED);
      const result = await client().post(
        '/payments',
        { amount: 1 },
        { headers: { [name]: 'mine' } },
      );
      expect(result).toMatchObject({ status: 201, idempotencyKey: 'mine', attempts: 2 });
      expect(seen.map((s) => s.key)).toEqual(['mine', 'mine']);
    },
  );

  it('refuses a key given twice, differently', async () => {
    await expect(
      client().post('/p', {}, { idempotencyKey: 'a', headers: { 'idempotency-key': 'b' } }),
    ).rejects.toThrow(TypeError);
    expect(seen).toHaveLength(0);
  });

  /** A body `fetch` takes as it is, the bytes and content type the server must see. */
  const form = () => {
    const data = new FormData();
    data.append('amount', '1999');
    data.append('receipt', new Blob(['a,b\n1,2'], { type: 'text/csv' }), 'receipt.csv');
    return data;
  };
  it.each<[string, () => unknown, string | RegExp, string | undefined | RegExp]>([
    ['a string', () => 'raw text', 'raw text', 'text/plain;charset=UTF-8'],
    [
      'URLSearchParams',
      () => new URLSearchParams({ amount: '1999', currency: 'eur' }),
      'amount=1999&currency=eur',
      'application/x-www-form-urlencoded;charset=UTF-8',
    ],
    ['a Blob', () => new Blob(['a,b\n1,2'], { type: 'text/csv' }), 'a,b\n1,2', 'text/csv'],
    ['an ArrayBuffer', () => new TextEncoder().encode('bytes').buffer, 'bytes', undefined],
    ['a Uint8Array', () => new TextEncoder().encode('bytes'), 'bytes', undefined],
    ['a Buffer', () => Buffer.from('bytes'), 'bytes', undefined],
    [
      'a ReadableStream',
      () =>
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('str'));
            controller.enqueue(new TextEncoder().encode('eam'));
            controller.close();
          },
        }),
      'stream',
      undefined,
    ],
    [
      'FormData',
      form,
      /name="amount"\r\n\r\n1999\r\n[\s\S]*filename="receipt.csv"\r\nContent-Type: text\/csv\r\n\r\na,b\n1,2\r\n/,
      /^multipart\/form-data; boundary=/,
    ],
  ])(
    'sends %s as fetch does, the same bytes on every attempt',
    async (_, makeBody, body, contentType) => {
      script = (n, response) =>
        n === 0 ? answer(response, 503, {}) : answer(response, 201, CREATED);
      const result = await client().post('/payments', makeBody());
      expect(result).toMatchObject({ status: 201, attempts: 2 });
      if (typeof body === 'string') expect(seen[0].body).toBe(body);
      else expect(seen[0].body).toMatch(body);
      expect(seen[1].body).toBe(seen[0].body);
      if (contentType instanceof RegExp)
        expect(seen[0].headers['content-type']).toMatch(contentType);
      else expect(seen[0].headers['content-type']).toBe(contentType);
      expect(seen[1].headers['content-type']).toBe(seen[0].headers['content-type']);
    },
  );

  it('reports a replay', async () => {
    script = (_, response) => answer(response, 201, CREATED, { 'idempotent-replayed': 'true' });
    expect((await client().post('/payments', {})).replayed).toBe(true);
  });

  it('waits Retry-After when it is longer than the jittered backoff', async () => {
    script = (n, response) =>
      n === 0
        ? answer(response, 409, { code: 'idempotency_key_in_use' }, { 'retry-after': '1' })
        : answer(response, 201, CREATED);
    const retries: IdempotentRetry[] = [];
    const result = await client({ onRetry: (retry) => retries.push(retry) }).post('/p', {});
    expect(result.status).toBe(201);
    expect(seen[1].at - seen[0].at).toBeGreaterThanOrEqual(990);
    expect(retries).toEqual([
      expect.objectContaining({
        attempt: 1,
        delayMs: 1000,
        retryAfter: true,
        reason: 'status',
        status: 409,
      }),
    ]);
  });

  it('gives up with the answer when Retry-After is longer than maxRetryAfterMs', async () => {
    script = (_, response) => answer(response, 503, {}, { 'retry-after': '120' });
    const result = await client({ maxRetryAfterMs: 60_000 }).post('/p', {});
    expect(result).toMatchObject({ status: 503, attempts: 1 });
  });

  it('draws each backoff uniformly under a ceiling that doubles up to maxBackoffMs', async () => {
    script = (n, response) => (n < 6 ? answer(response, 503, {}) : answer(response, 201, CREATED));
    const draws = [0, 0.5, 0.99, 0.25, 0.75, 0.1];
    const retries: IdempotentRetry[] = [];
    await client({
      backoffMs: 10,
      maxBackoffMs: 80,
      retries: 6,
      random: () => draws[retries.length],
      onRetry: (retry) => retries.push(retry),
    }).post('/p', {});
    expect(retries.map((r) => r.backoffCeilingMs)).toEqual([10, 20, 40, 80, 80, 80]);
    expect(retries.map((r) => r.delayMs)).toEqual([0, 10, 39, 20, 60, 8]);
  });

  it('retries when the connection is lost after the server got the request', async () => {
    script = (n, response) => (n === 0 ? 'destroy' : answer(response, 201, CREATED));
    const retries: IdempotentRetry[] = [];
    const result = await client({ onRetry: (retry) => retries.push(retry) }).post('/p', { a: 1 });
    expect(result).toMatchObject({ status: 201, attempts: 2 });
    expect(seen.map((s) => s.key)).toEqual([result.idempotencyKey, result.idempotencyKey]);
    expect(retries[0]).toMatchObject({ reason: 'network', attempt: 1 });
  });

  it('gives up an attempt after attemptTimeoutMs and retries', async () => {
    script = (n, response) => (n === 0 ? 'hang' : answer(response, 201, CREATED));
    const retries: IdempotentRetry[] = [];
    let retriedAfterMs = 0;
    const started = performance.now();
    const result = await client({
      attemptTimeoutMs: 200,
      onRetry: (retry) => {
        retriedAfterMs = performance.now() - started;
        retries.push(retry);
      },
    }).post('/p', {});
    expect(result).toMatchObject({ status: 201, attempts: 2 });
    expect(retries[0]).toMatchObject({ reason: 'timeout' });
    // Timed from the client's side: when the server saw each attempt also moves with how long
    // the first one took to arrive on a loaded host. (A timer may fire a millisecond early.)
    expect(retriedAfterMs).toBeGreaterThanOrEqual(198);
    expect(seen).toHaveLength(2);
  });

  it('throws IdempotentRequestError, with the key to retry with, when no attempt got an answer', async () => {
    script = () => 'destroy';
    const error = (await client({ retries: 3 })
      .post('/p', {}, { idempotencyKey: 'k-lost' })
      .catch((e: unknown) => e)) as IdempotentRequestError;
    expect(error).toBeInstanceOf(IdempotentRequestError);
    expect(error).toMatchObject({ idempotencyKey: 'k-lost', attempts: 4 });
    expect(error.message).toMatch(/same idempotency key/);
    expect(seen).toHaveLength(4);
  });

  it('returns the last retryable answer when the retries run out', async () => {
    script = (_, response) => answer(response, 503, { code: 'idempotency_store_unavailable' });
    const result = await client({ retries: 2 }).post('/p', {});
    expect(result).toMatchObject({ status: 503, attempts: 3 });
    expect(seen).toHaveLength(3);
  });

  it('stops at the deadline', async () => {
    script = (_, response) => answer(response, 503, {});
    const started = Date.now();
    const result = await client({
      retries: 1000,
      backoffMs: 50,
      maxBackoffMs: 50,
      deadlineMs: 400,
    }).post('/p', {});
    expect(result.status).toBe(503);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(result.attempts).toBeLessThan(1000);
  });

  it('starts no attempt with less than 100 ms left: it returns the answer in hand instead', async () => {
    script = (_, response) => answer(response, 503, {});
    const retries: IdempotentRetry[] = [];
    const result = await client({
      backoffMs: 60,
      maxBackoffMs: 60,
      deadlineMs: 150,
      random: () => 0.99,
      onRetry: (retry) => retries.push(retry),
    }).post('/p', {});
    // After the first 503 and a 59 ms wait, under 100 ms would be left: no second attempt.
    expect(result).toMatchObject({ status: 503, attempts: 1 });
    expect(seen).toHaveLength(1);
    expect(retries).toHaveLength(0);
  });

  it('stops at once when its signal aborts, during a wait or an attempt', async () => {
    script = (_, response) => answer(response, 503, {}, { 'retry-after': '5' });
    const waiting = new AbortController();
    setTimeout(() => waiting.abort(new Error('cancelled by the caller')), 100);
    await expect(client().post('/p', {}, { signal: waiting.signal })).rejects.toThrow(
      'cancelled by the caller',
    );
    expect(seen).toHaveLength(1);

    seen = [];
    script = () => 'hang';
    const inFlight = new AbortController();
    setTimeout(() => inFlight.abort(new Error('cancelled in flight')), 100);
    await expect(client().post('/p', {}, { signal: inFlight.signal })).rejects.toThrow(
      'cancelled in flight',
    );
    expect(seen).toHaveLength(1);
  });

  it('refuses bad options', () => {
    expect(() => client({ retries: -1 })).toThrow(/retries must be a number ≥ 0/);
    expect(() => client({ attemptTimeoutMs: 0 })).toThrow(/attemptTimeoutMs/);
  });
});

describe('isRetryableAnswer and parseRetryAfter', () => {
  it('retries only what another attempt can change', () => {
    expect(isRetryableAnswer(409, { code: 'idempotency_key_in_use' })).toBe(true);
    expect(isRetryableAnswer(409, 'idempotency_key_in_use')).toBe(false);
    expect(isRetryableAnswer(409, null)).toBe(false);
    expect(isRetryableAnswer(505, {})).toBe(false);
    expect(isRetryableAnswer(599, {})).toBe(true);
    expect(isRetryableAnswer(302, {})).toBe(false);
  });

  it('reads delay-seconds and HTTP dates', () => {
    const now = Date.parse('2026-11-23T12:00:00Z');
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter('Mon, 23 Nov 2026 12:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Mon, 23 Nov 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-1', now)).toBeUndefined();
    expect(parseRetryAfter(null, now)).toBeUndefined();
  });
});

describe('nest-idempotency/client', () => {
  it('imports nothing outside its own folder (no NestJS, TypeORM, pg or Node-only module)', () => {
    const dir = join(__dirname, '../../lib/client');
    for (const file of readdirSync(dir)) {
      const source = readFileSync(join(dir, file), 'utf8');
      const specifiers = [...source.matchAll(/(?:from|import\()\s*'([^']+)'/g)].map((m) => m[1]);
      expect({ file, outside: specifiers.filter((s) => !s.startsWith('./')) }).toEqual({
        file,
        outside: [],
      });
      expect(source).not.toMatch(/\brequire\(/);
    }
  });
});
