import { randomUUID } from 'node:crypto';
import type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';
import type { IdempotencyStoreTestFunctions } from './idempotency-store-conformance';

/**
 * What each part of the conformance suite declares its tests with: the runner's functions, with
 * an `it` that gives each test a fresh store and tears it down afterwards. Each part declares its
 * tests inside the `describe` group the suite opens for it.
 */
export interface ConformanceSuite extends IdempotencyStoreTestFunctions {
  /** The store of the test that runs. */
  readonly store: IdempotencyStore;
  /** Lets time pass on that store's clock. */
  advance(seconds: number): Promise<void>;
  /** Claims a new request (with `overrides`) on that store, and returns the request. */
  claimFresh(overrides?: Partial<ClaimRequest>): Promise<ClaimRequest>;
  /**
   * Claims a new request (with `overrides`) on that store, a claim that must win.
   * @returns the request, and the claim's record id and attempt
   */
  claimNew(
    overrides?: Partial<ClaimRequest>,
  ): Promise<{ req: ClaimRequest; recordId: string; attempt: number }>;
  /** Claims `req` on that store, a claim that must win. */
  claimed(req: ClaimRequest): Promise<{ recordId: string; attempt: number }>;
  /** Claims `req` again as another caller on that store, a claim that must find it completed. */
  replayed(req: ClaimRequest): Promise<Extract<ClaimResult, { outcome: 'completed' }>>;
}

/** Lease / TTL short enough to lapse within one `advance(LAPSE)`. */
export const SHORT = 0.3;
/** A wait that outlasts SHORT with a margin for a loaded machine. */
export const LAPSE = 0.45;
/** Durations that never lapse during a test. */
export const LONG = 3600;

export const FP_A = 'a'.repeat(64);
export const FP_B = 'b'.repeat(64);

export const RESPONSE: StoredResponse = {
  status: 201,
  headers: {
    'content-type': 'application/octet-stream',
    location: '/orders/1',
    etag: ['"x"', '"y"'],
  },
  // Not valid UTF-8: a lossy string round trip would change these bytes.
  body: Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x7b, 0x0a, 0xed, 0xa0, 0x80]),
};

export function request(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
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

export function refOf(req: ClaimRequest): IdempotencyRecordRef {
  return { scope: req.scope, key: req.key, ownerToken: req.ownerToken };
}

/** Claims again as another caller (new owner token), optionally with other fields. */
export function again(req: ClaimRequest, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { ...req, ownerToken: randomUUID(), ...overrides };
}

export function claimedOf(result: ClaimResult): { recordId: string; attempt: number } {
  if (result.outcome !== 'claimed') {
    throw new Error(`expected a claim to win, got ${result.outcome}`);
  }
  return result;
}

/** The replay of a claim that must find the record completed. */
export function completedOf(result: ClaimResult): Extract<ClaimResult, { outcome: 'completed' }> {
  if (result.outcome !== 'completed') throw new Error(`expected a replay, got ${result.outcome}`);
  return result;
}
