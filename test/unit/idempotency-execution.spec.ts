/**
 * IdempotencyExecution driven by hand, without Nest: a memory store on an injected clock, a
 * handler the test settles, and the ResponseSink calls an adapter would make. The tests follow
 * the rows of the state table in lib/execution/idempotency-execution.ts. What happened to the
 * key is read the way a retry reads it: by claiming it again as another request.
 */
import { randomUUID } from 'node:crypto';
import { BadRequestException, HttpException } from '@nestjs/common';
import type { CallHandler, Logger } from '@nestjs/common';
import { Subject, defer } from 'rxjs';
import { idempotencyRunScopes } from '../../lib/context/idempotency-run-scope';
import { IdempotencyEvents } from '../../lib/events/idempotency.events';
import type { IdempotencyEvent } from '../../lib/events/idempotency.events';
import { IdempotencyExecution } from '../../lib/execution/idempotency-execution';
import { IdempotencyRun } from '../../lib/execution/idempotency-run';
import {
  RESOLVED_DEFAULTS,
  mergeRouteOptions,
  validateRouteGroups,
} from '../../lib/config/idempotency.defaults';
import type { IdempotencyRouteOptions } from '../../lib/interfaces/idempotency-module-options.interface';
import type { StoredResponse } from '../../lib/interfaces/idempotency-record.interface';
import { MemoryIdempotencyStore } from '../../lib/storage/memory-idempotency.store';
import { flush, isPending } from '../fixtures/recording-response-sink';

const SCOPE = 'tenant-1';
const KEY = 'key-1';
const FP = 'fingerprint-a';
const OTHER_FP = 'fingerprint-b';
const JSON_TYPE = 'application/json; charset=utf-8';

let now: number;
let store: MemoryIdempotencyStore;
let events: IdempotencyEvent[];
let logger: { error: jest.Mock; warn: jest.Mock };
let warnUnstorable: jest.Mock;

beforeEach(() => {
  now = Date.parse('2026-01-01T00:00:00Z');
  store = new MemoryIdempotencyStore(() => now);
  events = [];
  logger = { error: jest.fn(), warn: jest.fn() };
  warnUnstorable = jest.fn();
});

/** Executions of the current test: their lease heartbeats must not outlive it. */
const created: IdempotencyExecution[] = [];

afterEach(async () => {
  jest.useRealTimers();
  // abort() stops the heartbeat; on an execution that already ended it changes nothing.
  for (const execution of created.splice(0)) await execution.abort().catch(() => undefined);
});

function claim(fingerprint: string, ownerToken: string, lockTimeoutSeconds = 60) {
  return store.claim({
    scope: SCOPE,
    key: KEY,
    fingerprint,
    method: 'POST',
    path: '/orders',
    ownerToken,
    lockTimeoutSeconds,
    ttlSeconds: 86_400,
  });
}

/** Claims the key and builds its execution, not begun yet. */
async function create(route: IdempotencyRouteOptions = {}, startMarked = true) {
  const options = mergeRouteOptions(RESOLVED_DEFAULTS, validateRouteGroups(route));
  const ownerToken = randomUUID();
  const won = await claim(FP, ownerToken, options.lockTimeoutSeconds);
  if (won.outcome !== 'claimed') throw new Error(`the key was not claimed: ${won.outcome}`);
  const events$ = new IdempotencyEvents();
  events$.subscribe((event) => events.push(event));
  const run = IdempotencyRun.begin({
    store,
    ref: { scope: SCOPE, key: KEY, ownerToken },
    identity: { scope: SCOPE, key: KEY, recordId: won.recordId, attempt: won.attempt },
    settings: { ttlSeconds: options.ttlSeconds, replayHeaders: options.replayHeaders },
    completion: options.transactional ? 'transaction' : 'response',
    lockTimeoutSeconds: options.lockTimeoutSeconds,
    maxLockHoldSeconds: options.maxLockHoldSeconds,
    claimedAt: Date.now(),
    onLost: () => undefined,
    onError: () => undefined,
  });
  const execution = new IdempotencyExecution(run, options, {
    store,
    events: events$,
    logger: logger as unknown as Logger,
    problemTypeBaseUri: 'urn:test:',
    errorBody: null,
    warnUnstorable,
    before: { status: 201, headers: {} },
    textContentType: 'text/html',
    startMarked,
  });
  created.push(execution);
  return execution;
}

async function start(route?: IdempotencyRouteOptions, startMarked?: boolean) {
  const execution = await create(route, startMarked);
  await execution.begin();
  return execution;
}

/** What a retry of the same request (or of another one) finds under the key. */
async function retry(fingerprint = FP): Promise<StoredResponse | string> {
  const found = await claim(fingerprint, randomUUID());
  if (found.outcome === 'completed') return found.response;
  if (found.outcome === 'claimed') return `claimed, attempt ${found.attempt}`;
  return found.outcome;
}

/** A handler whose work the test settles; it marks its start as `@Idempotent()` does. */
interface ManualHandler extends CallHandler {
  runs: number;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

function manualHandler(marksStart = true): ManualHandler {
  let resolve!: (value: unknown) => void;
  let reject!: (error: unknown) => void;
  const work = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const handler: ManualHandler = {
    runs: 0,
    resolve: (value) => resolve(value),
    reject: (error) => reject(error),
    handle: () =>
      defer(() => {
        handler.runs++;
        const state = idempotencyRunScopes.current();
        if (marksStart && state) state.handlerStarted = true;
        return work;
      }),
  };
  return handler;
}

/** Subscribes as Nest's interceptor chain would; resolves with how the outer stream ended. */
function subscribe(
  execution: IdempotencyExecution,
  handler: CallHandler,
): Promise<{ value?: unknown; error?: unknown }> {
  return new Promise((resolve) => {
    let value: unknown;
    execution.handle(handler).subscribe({
      next: (v) => (value = v),
      complete: () => resolve({ value }),
      error: (error) => resolve({ error }),
    });
  });
}

/** Starts an execution whose handler has already returned `value`. */
async function returned(value: unknown, route?: IdempotencyRouteOptions) {
  const execution = await start(route);
  const handler = manualHandler();
  const outer = subscribe(execution, handler);
  handler.resolve(value);
  expect(await outer).toEqual({ value });
  return execution;
}

/** Calls a sink method from the handler's own async context, as `@Res()` code does. */
function fromHandler<T>(execution: IdempotencyExecution, write: () => T): T {
  return idempotencyRunScopes.run(execution.runScope, write);
}

function json(status: number, value: unknown): StoredResponse {
  return {
    status,
    headers: { 'content-type': JSON_TYPE, 'x-request-id': 'r-1' },
    body: Buffer.from(JSON.stringify(value)),
  };
}

/** What the store keeps of `json(status, value)`: allow-listed headers only. */
function storedJson(status: number, value: unknown): StoredResponse {
  return {
    status,
    headers: { 'content-type': JSON_TYPE },
    body: Buffer.from(JSON.stringify(value)),
  };
}

const executed = (status: number, stored: boolean, attempt = 1) => ({
  type: 'executed',
  scope: SCOPE,
  key: KEY,
  status,
  stored,
  attempt,
});
const released = (reason: string) => ({ type: 'released', scope: SCOPE, key: KEY, reason });
const lockLost = (during: string) => ({ type: 'lock_lost', scope: SCOPE, key: KEY, during });

describe('IdempotencyExecution', () => {
  describe('settled, then the response is written', () => {
    it('stores the response and lets it out unchanged', async () => {
      const execution = await returned({ id: 1 });

      const outgoing = json(201, { id: 1 });
      await expect(execution.onResponse(outgoing)).resolves.toBe(outgoing);
      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
      expect(events).toEqual([executed(201, true)]);
    });

    it("stores the filter's response to a thrown HttpException with a final status", async () => {
      const execution = await start();
      const handler = manualHandler();
      const outer = subscribe(execution, handler);
      const declined = new HttpException({ code: 'card_declined' }, 402);
      handler.reject(declined);
      expect(await outer).toEqual({ error: declined });

      const outgoing = json(402, { code: 'card_declined' });
      await expect(execution.onResponse(outgoing)).resolves.toBe(outgoing);
      expect(await retry()).toEqual(storedJson(402, { code: 'card_declined' }));
      expect(events).toEqual([executed(402, true)]);
    });

    it('releases the key when the status is not in storeStatuses', async () => {
      const execution = await returned({ id: 1 }, { responses: { storeStatuses: [200] } });

      await expect(execution.onResponse(json(201, { id: 1 }))).resolves.toBeUndefined();
      expect(await retry()).toBe('claimed, attempt 2');
      expect(events).toEqual([released('not_final'), executed(201, false)]);
    });

    it.each([
      ['onResponse(undefined)', (e: IdempotencyExecution) => void e.onResponse(undefined)],
      ['onResponseEnded()', (e: IdempotencyExecution) => e.onResponseEnded()],
    ])('releases the key when the response streams: %s', async (_, streams) => {
      const execution = await returned(undefined);

      streams(execution);
      await flush();
      expect(await retry()).toBe('claimed, attempt 2');
      expect(events).toEqual([released('unstorable')]);
      expect(warnUnstorable).toHaveBeenCalledTimes(1);
    });

    it('lets a second response through undecided while the first is being decided', async () => {
      const execution = await returned({ id: 1 });

      const first = json(201, { id: 1 });
      const deciding = execution.onResponse(first);
      await expect(execution.onResponse(json(500, { oops: true }))).resolves.toBeUndefined();
      await expect(deciding).resolves.toBe(first);
      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
    });

    it('ignores everything once done', async () => {
      const execution = await returned({ id: 1 });
      await execution.onResponse(json(201, { id: 1 }));

      await expect(execution.onResponse(json(500, { late: true }))).resolves.toBeUndefined();
      execution.onResponseEnded();
      await flush();
      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
      expect(events).toEqual([executed(201, true)]);
    });
  });

  describe('a response from elsewhere while the handler runs (an outer timeout)', () => {
    async function answeredEarly() {
      const execution = await start();
      const handler = manualHandler();
      const outer = subscribe(execution, handler);
      await expect(execution.onResponse(json(408, { timeout: true }))).resolves.toBeUndefined();
      expect(await retry()).toBe('in_flight');
      return { handler, outer };
    }

    it("stores the handler's own value, rendered with the route's status, not the early response", async () => {
      const { handler, outer } = await answeredEarly();
      handler.resolve({ id: 1 });
      await outer;
      await flush();

      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
      expect(events).toEqual([executed(201, true)]);
    });

    it('releases the key when the handler throws a plain Error', async () => {
      const { handler, outer } = await answeredEarly();
      handler.reject(new Error('provider down'));
      await outer;
      await flush();

      expect(await retry()).toBe('claimed, attempt 2');
      expect(events).toEqual([released('not_final')]);
    });

    it('stores a thrown HttpException as the default filter writes it', async () => {
      const { handler, outer } = await answeredEarly();
      handler.reject(new HttpException({ code: 'card_declined' }, 402));
      await outer;
      await flush();

      expect(await retry()).toEqual(storedJson(402, { code: 'card_declined' }));
      expect(events).toEqual([executed(402, true)]);
    });
  });

  describe("a response from the handler's own code (@Res())", () => {
    it('holds it until the handler settles, then stores it and lets it out', async () => {
      const execution = await start();
      const handler = manualHandler();
      const outer = subscribe(execution, handler);
      const outgoing = json(201, { id: 1 });

      const decision = fromHandler(execution, () => execution.onResponse(outgoing));
      expect(await isPending(decision)).toBe(true);
      expect(await retry()).toBe('in_flight');

      handler.resolve(undefined);
      await expect(decision).resolves.toBe(outgoing);
      await outer;
      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
      expect(events).toEqual([executed(201, true)]);
    });

    it('answers with the failure instead when the handler throws after writing it', async () => {
      const execution = await start({ execution: { transactional: true } });
      const handler = manualHandler();
      const outer = subscribe(execution, handler);
      const decision = fromHandler(execution, () => execution.onResponse(json(201, { id: 1 })));

      handler.reject(new Error('failed after writing'));
      const answer = await decision;
      // Its writes were rolled back: a 201 must not go out, nor be stored.
      expect(answer?.status).toBe(500);
      expect(JSON.parse(answer!.body.toString())).toEqual({
        statusCode: 500,
        message: 'Internal server error',
      });
      await outer;
      expect(await retry()).toBe('claimed, attempt 2');
    });

    it('stores a final HttpException the handler threw after writing, not the held response', async () => {
      const execution = await start();
      const handler = manualHandler();
      const outer = subscribe(execution, handler);
      const decision = fromHandler(execution, () => execution.onResponse(json(201, { id: 1 })));

      handler.reject(new HttpException({ code: 'card_declined' }, 402));
      expect((await decision)?.status).toBe(402);
      await outer;
      expect(await retry()).toEqual(storedJson(402, { code: 'card_declined' }));
    });
  });

  describe('a streamed response while the handler runs', () => {
    it.each([
      [
        'onResponse(undefined)',
        async (e: IdempotencyExecution) => expect(await e.onResponse(undefined)).toBeUndefined(),
      ],
      ['onResponseEnded()', async (e: IdempotencyExecution) => e.onResponseEnded()],
    ])('keeps the key until the handler settles, then releases it: %s', async (_, streams) => {
      const execution = await start();
      const handler = manualHandler();
      const outer = subscribe(execution, handler);

      await streams(execution);
      expect(await retry()).toBe('in_flight');
      handler.resolve(undefined);
      await outer;
      await flush();

      expect(await retry()).toBe('claimed, attempt 2');
      expect(events).toEqual([released('unstorable')]);
    });
  });

  describe('a request rejected before its handler started (a pipe)', () => {
    async function rejectedByPipe(startMarked: boolean, status: number) {
      const execution = await start({}, startMarked);
      const handler = manualHandler(false);
      const outer = subscribe(execution, handler);
      handler.reject(new BadRequestException('id must be a number'));
      await outer;
      return execution.onResponse(json(status, { message: 'id must be a number' }));
    }

    it('forgets the record when the route marks its start: a corrected request may use the key', async () => {
      await expect(rejectedByPipe(true, 400)).resolves.toBeUndefined();
      expect(await retry(OTHER_FP)).toBe('claimed, attempt 1');
      expect(events).toEqual([released('rejected_before_handler')]);
    });

    it("treats it as the handler's own 4xx when the route cannot mark its start", async () => {
      await expect(rejectedByPipe(false, 400)).resolves.toBeDefined();
      expect(await retry(OTHER_FP)).toBe('mismatch');
      expect(events).toEqual([executed(400, true)]);
    });

    it('keeps the fingerprint of a released record when the route cannot mark its start', async () => {
      await expect(rejectedByPipe(false, 500)).resolves.toBeUndefined();
      expect(await retry(OTHER_FP)).toBe('mismatch');
      expect(events).toEqual([released('not_final'), executed(500, false)]);
    });
  });

  describe('subscriptions', () => {
    it('runs the handler once when run() is subscribed twice', async () => {
      const execution = await start();
      const handler = manualHandler();
      const first = subscribe(execution, handler);
      const second = subscribe(execution, handler); // an outer retry()
      handler.resolve('done');

      expect(await first).toEqual({ value: 'done' });
      expect(((await second).error as Error | undefined)?.message).toMatch(/subscribed twice/);
      expect(handler.runs).toBe(1);
    });

    it("follows the handler's work after the outer subscriber unsubscribed", async () => {
      const execution = await start();
      const work = new Subject<unknown>();
      const subscription = execution.handle({ handle: () => work }).subscribe({ error: () => {} });
      subscription.unsubscribe(); // an outer timeout() gave up...
      await execution.onResponse(json(408, { timeout: true })); // ...and answered 408

      expect(work.observed).toBe(true);
      work.next({ id: 1 });
      work.complete();
      await flush();
      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
      expect(events).toEqual([executed(201, true)]);
    });
  });

  describe('the lease', () => {
    it('is renewed while the handler runs, and no longer once the response is stored', async () => {
      jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
      const execution = await start({ execution: { lockTimeoutSeconds: 3 } });
      const handler = manualHandler();
      const outer = subscribe(execution, handler);

      now += 2_000;
      await jest.advanceTimersByTimeAsync(1_000); // one beat: leased until now + 3 s
      now += 2_000; // past the first lease
      expect(await retry()).toBe('in_flight');

      handler.resolve('ok');
      await outer;
      await execution.onResponse(json(201, 'ok'));
      await jest.advanceTimersByTimeAsync(10_000);
      expect(events).toEqual([executed(201, true)]);
    });
  });

  describe('a completion that fails without a transaction', () => {
    it('lets the response out but reports it unstored when the lease was taken over', async () => {
      const execution = await returned({ id: 1 });
      now += 61_000;
      expect(await retry()).toBe('claimed, attempt 2');

      const outgoing = json(201, { id: 1 });
      await expect(execution.onResponse(outgoing)).resolves.toBe(outgoing);
      expect(await retry()).toBe('in_flight'); // still the retry's
      expect(events).toEqual([lockLost('complete'), executed(201, false)]);
    });

    it('lets the response out but reports it unstored when the store fails', async () => {
      jest.spyOn(store, 'complete').mockRejectedValue(new Error('db down'));
      const execution = await returned({ id: 1 });

      const outgoing = json(201, { id: 1 });
      await expect(execution.onResponse(outgoing)).resolves.toBe(outgoing);
      expect(logger.error).toHaveBeenCalledTimes(1);
      expect(events).toEqual([
        { type: 'store_error', operation: 'complete', error: new Error('db down') },
        executed(201, false),
      ]);
    });
  });

  describe('transactional routes', () => {
    /** Records the store's transaction calls, in order, in `log`. */
    function recordTransactions(log: string[], options: { completeFails?: boolean } = {}) {
      const begin = store.beginTransaction.bind(store);
      jest.spyOn(store, 'beginTransaction').mockImplementation(async () => {
        const transaction = await begin();
        log.push('begin');
        return {
          manager: transaction.manager,
          complete: async (ref, response, ttlSeconds) => {
            log.push('complete');
            if (options.completeFails) throw new Error('db down');
            return transaction.complete(ref, response, ttlSeconds);
          },
          commit: () => (log.push('commit'), transaction.commit()),
          rollback: () => (log.push('rollback'), transaction.rollback()),
        };
      });
    }

    async function completed(log: string[], options?: { completeFails?: boolean }) {
      recordTransactions(log, options);
      const execution = await returned({ id: 1 }, { execution: { transactional: true } });
      expect(log).toEqual(['begin']);
      return execution;
    }

    it('opens the transaction at begin() and commits it with the stored response', async () => {
      const log: string[] = [];
      const execution = await completed(log);
      const outgoing = json(201, { id: 1 });

      await expect(execution.onResponse(outgoing)).resolves.toBe(outgoing);
      expect(log).toEqual(['begin', 'complete', 'commit']);
      expect(await retry()).toEqual(storedJson(201, { id: 1 }));
      expect(events).toEqual([executed(201, true)]);
    });

    it('rolls a failed handler back before its error reaches the subscriber', async () => {
      const log: string[] = [];
      recordTransactions(log);
      const execution = await start({ execution: { transactional: true } });
      const handler = manualHandler();
      const outer = subscribe(execution, handler);
      handler.reject(new Error('provider down'));

      await outer.then(() => log.push('error delivered'));
      expect(log).toEqual(['begin', 'rollback', 'error delivered']);
    });

    it('rolls back with the released key when the response is not final', async () => {
      const log: string[] = [];
      const execution = await completed(log);

      await expect(execution.onResponse(json(500, { oops: true }))).resolves.toBeUndefined();
      expect(log).toEqual(['begin', 'rollback']);
      expect(await retry()).toBe('claimed, attempt 2');
      expect(events).toEqual([released('not_final'), executed(500, false)]);
    });

    it('answers 409 when another request took the key over before the completion', async () => {
      const log: string[] = [];
      const execution = await completed(log);
      now += 61_000; // the lease lapsed...
      expect(await retry()).toBe('claimed, attempt 2'); // ...and a retry took the key

      const decision = await execution.onResponse(json(201, { id: 1 }));
      expect(decision).toMatchObject({
        status: 409,
        headers: { 'content-type': 'application/problem+json', 'retry-after': '1' },
      });
      expect(JSON.parse(decision!.body.toString())).toMatchObject({
        status: 409,
        code: 'idempotency_key_in_use',
        type: 'urn:test:idempotency_key_in_use',
      });
      expect(log).toEqual(['begin', 'complete', 'rollback']);
      expect(await retry()).toBe('in_flight'); // still the retry's
      expect(events).toEqual([
        lockLost('complete'),
        { type: 'rejected', scope: SCOPE, key: KEY, code: 'idempotency_key_in_use', status: 409 },
      ]);
    });

    it('answers 503 and releases the key when the completion cannot be written', async () => {
      const log: string[] = [];
      const execution = await completed(log, { completeFails: true });

      const decision = await execution.onResponse(json(201, { id: 1 }));
      expect(decision).toMatchObject({ status: 503 });
      expect(JSON.parse(decision!.body.toString())).toMatchObject({
        code: 'idempotency_store_unavailable',
      });
      expect(log).toEqual(['begin', 'complete', 'rollback']);
      expect(await retry()).toBe('claimed, attempt 2');
      expect(events.map((e) => e.type)).toEqual(['store_error', 'released', 'rejected']);
    });

    it('returns the refusal itself to a call that is not an HTTP request (respond())', async () => {
      const log: string[] = [];
      const execution = await completed(log, { completeFails: true });

      const decision = await execution.respond(json(200, { id: 1 }));
      expect(decision?.kind).toBe('refused');
      expect(decision?.kind === 'refused' && decision.problem.code).toBe(
        'idempotency_store_unavailable',
      );
      expect(await retry()).toBe('claimed, attempt 2');
    });

    it('returns the stored answer to a call that is not an HTTP request', async () => {
      const log: string[] = [];
      const execution = await completed(log);
      const outgoing = json(200, { id: 1 });

      await expect(execution.respond(outgoing)).resolves.toEqual({
        kind: 'stored',
        answer: outgoing,
      });
      expect(await retry()).toEqual(storedJson(200, { id: 1 }));
    });

    it('forgets the record when abort() follows a failed begin()', async () => {
      jest.spyOn(store, 'beginTransaction').mockRejectedValue(new Error('connection refused'));
      const execution = await create({ execution: { transactional: true } });

      await expect(execution.begin()).rejects.toThrow('connection refused');
      await execution.abort();
      expect(await retry(OTHER_FP)).toBe('claimed, attempt 1');
      expect(events).toEqual([released('rejected_before_handler')]);
    });
  });
});
