/**
 * The storage contract every IdempotencyStore must honour (lib/storage/idempotency.store.ts):
 * atomic claim outcomes, mismatch before in_flight, byte-exact replays, owner-token guards
 * (including a stale owner after a takeover), release modes, lease renewal, TTL expiry, purge
 * and transactional completion, as one suite that runs against any store.
 *
 * It takes the test runner's functions as a parameter instead of using Jest's globals, so the
 * library compiles without a test runner's types and Jest and Vitest users pass their own. The
 * assertions it makes are the ones both runners have: `toBe`, `not.toBe` and `toEqual`.
 */
import { randomUUID } from 'node:crypto';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';

/**
 * A fresh store for one test of the conformance suite, with control of the clock it reads: the
 * suite checks leases and expiry, so it must let time pass.
 */
export interface IdempotencyStoreUnderTest {
  /** The store, empty: no record from an earlier test. */
  store: IdempotencyStore;
  /**
   * Lets `seconds` pass on the store's clock: move an injected clock, or wait in real time (a
   * store that reads the database's clock). The suite never asks for more than a second.
   */
  advance(seconds: number): Promise<void> | void;
  /** Called after the test, passed or failed: close what the store opened. */
  teardown?(): Promise<void> | void;
}

/**
 * The test runner's functions the suite calls, typed as small as the suite needs so that Jest's
 * (globals or `@jest/globals`) and Vitest's (`vitest`) fit without a cast.
 */
export interface IdempotencyStoreTestFunctions {
  /** Groups tests: Jest's or Vitest's `describe`. */
  describe(name: string, body: () => void): void;
  /** Declares one test: Jest's or Vitest's `it` (or `test`). */
  it(name: string, body: () => Promise<void>): void;
  /** Jest's or Vitest's `expect`; the suite uses `toBe`, `not.toBe` and `toEqual` only. */
  expect(actual: unknown): {
    /** Identity (`Object.is`). */
    toBe(expected: unknown): void;
    /** Deep equality. */
    toEqual(expected: unknown): void;
    /** The negated matchers. */
    not: {
      /** Not identical. */
      toBe(expected: unknown): void;
    };
  };
}

/** Lease / TTL short enough to lapse within one `advance(LAPSE)`. */
const SHORT = 0.3;
/** A wait that outlasts SHORT with a margin for a loaded machine. */
const LAPSE = 0.45;
/** Durations that never lapse during a test. */
const LONG = 3600;

const FP_A = 'a'.repeat(64);
const FP_B = 'b'.repeat(64);

const RESPONSE: StoredResponse = {
  status: 201,
  headers: {
    'content-type': 'application/octet-stream',
    location: '/orders/1',
    etag: ['"x"', '"y"'],
  },
  // Not valid UTF-8: a lossy string round trip would change these bytes.
  body: Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x7b, 0x0a, 0xed, 0xa0, 0x80]),
};

function request(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: 'tenant-1',
    key: `key-${randomUUID()}`,
    fingerprint: FP_A,
    method: 'POST',
    path: '/orders?x=1',
    ownerToken: randomUUID(),
    lockTimeoutSeconds: LONG,
    ttlSeconds: LONG,
    ...overrides,
  };
}

function refOf(req: ClaimRequest): IdempotencyRecordRef {
  return { scope: req.scope, key: req.key, ownerToken: req.ownerToken };
}

/** Claims again as another caller (new owner token), optionally with other fields. */
function again(req: ClaimRequest, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { ...req, ownerToken: randomUUID(), ...overrides };
}

function claimedOf(result: ClaimResult): { recordId: string; attempt: number } {
  if (result.outcome !== 'claimed') {
    throw new Error(`expected a claim to win, got ${result.outcome}`);
  }
  return result;
}

/**
 * Declares the conformance suite for one store: about thirty tests of the contract the module
 * relies on (lib/storage/idempotency.store.ts), so a store of your own is checked against the same
 * cases as the memory and PostgreSQL stores before it guards a payment. Each test gets a fresh
 * store from `makeStore` and tears it down after, so no hooks are needed.
 *
 * @param name - shown in the test names: `IdempotencyStore conformance: <name>`
 * @param makeStore - called at the start of every test; returns an empty store and its clock
 * @param testFunctions - the runner's `describe`, `it` and `expect` (Jest or Vitest)
 *
 * @example
 * ```ts
 * import { describe, expect, it } from '@jest/globals'; // or from 'vitest'
 * import { describeIdempotencyStoreConformance } from 'nest-idempotency/testing';
 *
 * describeIdempotencyStoreConformance(
 *   'RedisIdempotencyStore',
 *   async () => ({
 *     store: new RedisIdempotencyStore(await connect()),
 *     advance: (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000)),
 *     teardown: () => disconnect(),
 *   }),
 *   { describe, it, expect },
 * );
 * ```
 */
export function describeIdempotencyStoreConformance(
  name: string,
  makeStore: () => Promise<IdempotencyStoreUnderTest> | IdempotencyStoreUnderTest,
  testFunctions: IdempotencyStoreTestFunctions,
): void {
  const { describe, expect } = testFunctions;
  // Set by `it` below for the test that runs; the runner runs one test of a file at a time.
  let store: IdempotencyStore;
  let advance: (seconds: number) => Promise<void>;

  /** A test with a fresh store, torn down afterwards; a failing test's error wins over teardown's. */
  const it = (title: string, body: () => Promise<void>): void =>
    testFunctions.it(title, async () => {
      const subject = await makeStore();
      store = subject.store;
      advance = async (seconds) => {
        await subject.advance(seconds);
      };
      let passed = false;
      try {
        await body();
        passed = true;
      } finally {
        if (passed) await subject.teardown?.();
        else await Promise.resolve(subject.teardown?.()).catch(() => undefined);
      }
    });

  describe(`IdempotencyStore conformance: ${name}`, () => {
    describe('claim', () => {
      it('claims a fresh key as attempt 1', async () => {
        const result = await store.claim(request());
        expect(result.outcome).toBe('claimed');
        const { recordId } = claimedOf(result);
        expect(typeof recordId).toBe('string');
        expect(result).toEqual({ outcome: 'claimed', recordId, attempt: 1 });
      });

      it('reports in_flight to the same request while the lease is live', async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        expect(await store.claim(again(req))).toEqual({
          outcome: 'in_flight',
          recordId: first.recordId,
        });
      });

      it('reports mismatch before in_flight for another fingerprint', async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        expect(await store.claim(again(req, { fingerprint: FP_B }))).toEqual({
          outcome: 'mismatch',
          recordId: first.recordId,
        });
      });

      it('reports mismatch for another fingerprint on a completed record', async () => {
        const req = request();
        await store.claim(req);
        expect(await store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
        expect((await store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
      });

      it('reports mismatch for another fingerprint on a released record', async () => {
        const req = request();
        await store.claim(req);
        expect(await store.release(refOf(req), 'retry')).toBe(true);
        expect((await store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
      });

      it('reports mismatch (no takeover) for another fingerprint after the lease lapsed', async () => {
        const req = request({ lockTimeoutSeconds: SHORT });
        await store.claim(req);
        await advance(LAPSE);
        expect((await store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
      });

      it('replays a completed record with identical status, headers and body bytes', async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        expect(await store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
        const replay = await store.claim(again(req));
        expect(replay.outcome).toBe('completed');
        if (replay.outcome !== 'completed') return;
        expect(replay.recordId).toBe(first.recordId);
        expect(replay.response.status).toBe(RESPONSE.status);
        expect(replay.response.headers).toEqual(RESPONSE.headers);
        expect(Buffer.isBuffer(replay.response.body)).toBe(true);
        expect(replay.response.body.equals(RESPONSE.body)).toBe(true);
      });

      it('replays an empty body as zero bytes', async () => {
        const req = request();
        await store.claim(req);
        await store.complete(refOf(req), { status: 204, headers: {}, body: Buffer.alloc(0) }, LONG);
        const replay = await store.claim(again(req));
        expect(replay.outcome).toBe('completed');
        if (replay.outcome !== 'completed') return;
        expect(replay.response.status).toBe(204);
        expect(replay.response.body.length).toBe(0);
      });

      it('keeps scopes independent: one key in two scopes is two records', async () => {
        const req = request({ scope: 'alice' });
        const bob = again(req, { scope: 'bob' });
        const a = claimedOf(await store.claim(req));
        const b = claimedOf(await store.claim(bob));
        expect(a.recordId).not.toBe(b.recordId);
        await store.complete(refOf(req), RESPONSE, LONG);
        // Bob never sees Alice's stored response.
        expect((await store.claim(again(bob))).outcome).toBe('in_flight');
        expect((await store.claim(again(req))).outcome).toBe('completed');
      });
    });

    describe('owner guard', () => {
      it('refuses complete with a wrong owner token and leaves the record in flight', async () => {
        const req = request();
        await store.claim(req);
        const wrong = { ...refOf(req), ownerToken: randomUUID() };
        expect(await store.complete(wrong, RESPONSE, LONG)).toBe(false);
        expect((await store.claim(again(req))).outcome).toBe('in_flight');
        expect(await store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
      });

      it('refuses release with a wrong owner token and leaves the record in flight', async () => {
        const req = request();
        await store.claim(req);
        const wrong = { ...refOf(req), ownerToken: randomUUID() };
        expect(await store.release(wrong, 'retry')).toBe(false);
        expect(await store.release(wrong, 'forget')).toBe(false);
        expect((await store.claim(again(req))).outcome).toBe('in_flight');
        expect((await store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
      });

      it('refuses renew with a wrong owner token and does not extend the lease', async () => {
        const req = request({ lockTimeoutSeconds: SHORT });
        await store.claim(req);
        const wrong = { ...refOf(req), ownerToken: randomUUID() };
        expect(await store.renew(wrong, LONG)).toBe(false);
        await advance(LAPSE);
        expect((await store.claim(again(req))).outcome).toBe('claimed');
      });

      it('refuses writes on a key that was never claimed', async () => {
        const req = request();
        expect(await store.complete(refOf(req), RESPONSE, LONG)).toBe(false);
        expect(await store.renew(refOf(req), LONG)).toBe(false);
        expect(await store.release(refOf(req), 'retry')).toBe(false);
        expect(claimedOf(await store.claim(req)).attempt).toBe(1);
      });
    });

    describe('lease lapse and takeover', () => {
      it('lets the same request take over a lapsed lease: new owner, attempt 2, same recordId', async () => {
        const req = request({ lockTimeoutSeconds: SHORT });
        const first = claimedOf(await store.claim(req));
        await advance(LAPSE);
        const takeover = again(req);
        expect(await store.claim(takeover)).toEqual({
          outcome: 'claimed',
          recordId: first.recordId,
          attempt: 2,
        });
      });

      it('stops the old owner from completing, renewing or releasing after a takeover', async () => {
        const old = request({ lockTimeoutSeconds: SHORT });
        await store.claim(old);
        await advance(LAPSE);
        const current = again(old, { lockTimeoutSeconds: LONG });
        claimedOf(await store.claim(current));

        expect(await store.complete(refOf(old), RESPONSE, LONG)).toBe(false);
        expect(await store.renew(refOf(old), LONG)).toBe(false);
        expect(await store.release(refOf(old), 'retry')).toBe(false);
        expect(await store.release(refOf(old), 'forget')).toBe(false);

        // Nothing changed: the new owner still holds a live lease ...
        expect((await store.claim(again(old))).outcome).toBe('in_flight');
        // ... and can still complete with its own response.
        const mine: StoredResponse = { status: 200, headers: {}, body: Buffer.from('mine') };
        expect(await store.complete(refOf(current), mine, LONG)).toBe(true);
        const replay = await store.claim(again(old));
        expect(replay.outcome).toBe('completed');
        if (replay.outcome === 'completed') {
          expect(replay.response.status).toBe(200);
          expect(replay.response.body.toString()).toBe('mine');
        }
      });

      it('renew extends the lease past the point where the old lease would have lapsed', async () => {
        const req = request({ lockTimeoutSeconds: 0.5 });
        await store.claim(req);
        await advance(0.25);
        expect(await store.renew(refOf(req), 1)).toBe(true);
        await advance(0.4); // 0.65 s after the claim: the original 0.5 s lease has lapsed
        expect((await store.claim(again(req))).outcome).toBe('in_flight');
      });
    });

    describe('release', () => {
      it("'retry' keeps the fingerprint: another payload mismatches, the same one reclaims", async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        expect(await store.release(refOf(req), 'retry')).toBe(true);
        expect((await store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
        expect(await store.claim(again(req))).toEqual({
          outcome: 'claimed',
          recordId: first.recordId,
          attempt: 2,
        });
      });

      it("'forget' on attempt 1 deletes the record: another payload can then claim", async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        expect(await store.release(refOf(req), 'forget')).toBe(true);
        const next = claimedOf(await store.claim(again(req, { fingerprint: FP_B })));
        expect(next.attempt).toBe(1);
        expect(next.recordId).not.toBe(first.recordId);
      });

      it("'forget' on attempt 2 or later keeps the record released", async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        await store.release(refOf(req), 'retry');
        const second = again(req);
        expect(claimedOf(await store.claim(second)).attempt).toBe(2);
        expect(await store.release(refOf(second), 'forget')).toBe(true);
        expect((await store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
        expect(await store.claim(again(req))).toEqual({
          outcome: 'claimed',
          recordId: first.recordId,
          attempt: 3,
        });
      });

      it('a released record cannot be completed by its former owner', async () => {
        const req = request();
        await store.claim(req);
        await store.release(refOf(req), 'retry');
        expect(await store.complete(refOf(req), RESPONSE, LONG)).toBe(false);
        expect((await store.claim(again(req))).outcome).toBe('claimed');
      });
    });

    describe('TTL and purge', () => {
      it('treats a completed record past its TTL as absent: new recordId, attempt 1', async () => {
        const req = request();
        const first = claimedOf(await store.claim(req));
        await store.complete(refOf(req), RESPONSE, SHORT);
        expect((await store.claim(again(req))).outcome).toBe('completed');
        await advance(LAPSE);
        const next = claimedOf(await store.claim(again(req, { fingerprint: FP_B })));
        expect(next.attempt).toBe(1);
        expect(next.recordId).not.toBe(first.recordId);
      });

      it('purges expired completed and released records in batches, never a live lease', async () => {
        const completed = [request(), request(), request()];
        for (const req of completed) {
          await store.claim(req);
          expect(await store.complete(refOf(req), RESPONSE, SHORT)).toBe(true);
        }
        const released = request({ ttlSeconds: SHORT });
        await store.claim(released);
        await store.release(refOf(released), 'retry');
        const lapsedInFlight = request({ ttlSeconds: SHORT, lockTimeoutSeconds: SHORT });
        await store.claim(lapsedInFlight);
        const liveLease = request({ ttlSeconds: SHORT, lockTimeoutSeconds: LONG });
        await store.claim(liveLease);
        const stillFresh = request();
        await store.claim(stillFresh);
        await store.complete(refOf(stillFresh), RESPONSE, LONG);

        await advance(LAPSE);

        expect(await store.purgeExpired(2)).toBe(2);
        expect(await store.purgeExpired(100)).toBe(3);
        expect(await store.purgeExpired(100)).toBe(0);

        expect((await store.claim(again(liveLease))).outcome).toBe('in_flight');
        expect(await store.complete(refOf(liveLease), RESPONSE, LONG)).toBe(true);
        expect((await store.claim(again(stillFresh))).outcome).toBe('completed');
        // The purged released record is gone: another payload may now use its key.
        expect(claimedOf(await store.claim(again(released, { fingerprint: FP_B }))).attempt).toBe(
          1,
        );
      });

      it('purges nothing and returns 0 when nothing expired', async () => {
        const req = request();
        await store.claim(req);
        await store.complete(refOf(req), RESPONSE, LONG);
        expect(await store.purgeExpired(100)).toBe(0);
        expect((await store.claim(again(req))).outcome).toBe('completed');
      });
    });

    describe('transactions', () => {
      it('complete + commit makes the record completed', async () => {
        const req = request();
        await store.claim(req);
        const tx = await store.beginTransaction();
        expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
        await tx.commit();
        const replay = await store.claim(again(req));
        expect(replay.outcome).toBe('completed');
        if (replay.outcome === 'completed') {
          expect(replay.response.body.equals(RESPONSE.body)).toBe(true);
        }
      });

      it('complete + rollback leaves the record in flight and its owner in charge', async () => {
        const req = request();
        await store.claim(req);
        const tx = await store.beginTransaction();
        expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
        await tx.rollback();
        expect((await store.claim(again(req))).outcome).toBe('in_flight');
        expect(await store.release(refOf(req), 'retry')).toBe(true);
      });

      it('complete inside a transaction refuses an owner whose lease was taken over', async () => {
        const old = request({ lockTimeoutSeconds: SHORT });
        await store.claim(old);
        const tx = await store.beginTransaction();
        await advance(LAPSE);
        const current = again(old, { lockTimeoutSeconds: LONG });
        claimedOf(await store.claim(current));
        expect(await tx.complete(refOf(old), RESPONSE, LONG)).toBe(false);
        await tx.commit();
        expect((await store.claim(again(old))).outcome).toBe('in_flight');
        expect(await store.complete(refOf(current), RESPONSE, LONG)).toBe(true);
      });

      it('a completion accepted in a transaction is not lost to a takeover tried before commit', async () => {
        const req = request({ lockTimeoutSeconds: SHORT });
        await store.claim(req);
        const tx = await store.beginTransaction();
        expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
        await advance(LAPSE);
        // The lease has lapsed while the transaction is still open. A store may make this claim
        // wait for the transaction, or refuse the commit; it may not let both owners win.
        const racing = store.claim(again(req));
        const committed = await tx.commit().then(
          () => true,
          () => false,
        );
        const raced = await racing;
        if (committed) {
          expect(raced.outcome).toBe('completed');
          expect((await store.claim(again(req))).outcome).toBe('completed');
        } else {
          expect(raced.outcome).toBe('claimed');
        }
      });

      it('complete inside a transaction is owner-guarded', async () => {
        const req = request();
        await store.claim(req);
        const tx = await store.beginTransaction();
        const wrong = { ...refOf(req), ownerToken: randomUUID() };
        expect(await tx.complete(wrong, RESPONSE, LONG)).toBe(false);
        await tx.commit();
        expect((await store.claim(again(req))).outcome).toBe('in_flight');
      });
    });
  });
}
