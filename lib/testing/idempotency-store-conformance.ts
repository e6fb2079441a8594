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
import type { IdempotencyStore } from '../storage/idempotency.store';
import { describeClaims, describeLeaseTakeover, describeOwnerGuard } from './claim-conformance';
import { again, claimedOf, completedOf, request } from './conformance-fixtures';
import type { ConformanceSuite } from './conformance-fixtures';
import {
  describeExpiryAndPurge,
  describeRelease,
  describeTransactions,
} from './record-lifecycle-conformance';

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

/**
 * Declares the conformance suite for one store: a test for each case of the contract the module
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
  const { describe } = testFunctions;
  // Set by `it` below for the test that runs; the runner runs one test of a file at a time.
  let current: IdempotencyStoreUnderTest;

  /** A test with a fresh store, torn down afterwards; a failing test's error wins over teardown's. */
  const it = (title: string, body: () => Promise<void>): void =>
    testFunctions.it(title, async () => {
      const subject = (current = await makeStore());
      await body().catch(async (error: unknown) => {
        await Promise.resolve(subject.teardown?.()).catch(() => undefined);
        throw error;
      });
      await subject.teardown?.();
    });

  const suite: ConformanceSuite = {
    ...testFunctions,
    it,
    get store() {
      return current.store;
    },
    advance: async (seconds) => void (await current.advance(seconds)),
    async claimFresh(overrides) {
      const req = request(overrides);
      await current.store.claim(req);
      return req;
    },
    async claimNew(overrides) {
      const req = request(overrides);
      return { req, ...claimedOf(await current.store.claim(req)) };
    },
    claimed: async (req) => claimedOf(await current.store.claim(req)),
    replayed: async (req) => completedOf(await current.store.claim(again(req))),
  };

  describe(`IdempotencyStore conformance: ${name}`, () => {
    describe('claim', () => describeClaims(suite));
    describe('owner guard', () => describeOwnerGuard(suite));
    describe('lease lapse and takeover', () => describeLeaseTakeover(suite));
    describe('release', () => describeRelease(suite));
    describe('TTL and purge', () => describeExpiryAndPurge(suite));
    describe('transactions', () => describeTransactions(suite));
  });
}
