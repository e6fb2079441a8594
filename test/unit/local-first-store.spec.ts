/**
 * LocalFirstIdempotencyStore keeps answering for a key whose lease its owner renews: after the
 * first lease, a duplicate is still answered `in_flight` here (a 409, even while the database is
 * down) instead of going to the wrapped store (a 503 during an outage), and the completion is
 * still cached for replays. One injected clock drives both layers.
 */
import type {
  ClaimRequest,
  ClaimResult,
  StoredResponse,
} from '../../lib/interfaces/idempotency-record.interface';
import { LocalFirstIdempotencyStore } from '../../lib/storage/local-first-idempotency.store';
import { MemoryIdempotencyStore } from '../../lib/storage/memory-idempotency.store';

/** The wrapped store: counts the claims that reach it, and can be down. */
class CountingStore extends MemoryIdempotencyStore {
  claims = 0;
  down = false;

  override async claim(request: ClaimRequest): Promise<ClaimResult> {
    this.claims++;
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    return super.claim(request);
  }
}

const LOCK_TIMEOUT_SECONDS = 1;
const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json; charset=utf-8' },
  body: Buffer.from('{"id":1}'),
};

describe('LocalFirstIdempotencyStore with a renewed lease', () => {
  let time: number;
  let inner: CountingStore;
  let store: LocalFirstIdempotencyStore;

  const claimRequest = (ownerToken: string): ClaimRequest => ({
    scope: 's',
    key: 'k',
    fingerprint: 'fp',
    method: 'POST',
    path: '/orders',
    ownerToken,
    lockTimeoutSeconds: LOCK_TIMEOUT_SECONDS,
    ttlSeconds: 3_600,
  });
  const owner = { scope: 's', key: 'k', ownerToken: 'owner' };

  beforeEach(() => {
    time = 10_000;
    const now = () => time;
    inner = new CountingStore(now);
    store = new LocalFirstIdempotencyStore(inner, { maxEntries: 100, maxBytes: 1 << 20 }, now);
  });

  /** Claims the key, then renews its lease late in the first one and moves past that one. */
  async function claimAndRenewPastFirstLease(): Promise<void> {
    expect((await store.claim(claimRequest('owner'))).outcome).toBe('claimed');
    time += 900;
    expect(await store.renew(owner, LOCK_TIMEOUT_SECONDS)).toBe(true);
    time += 500; // past the first lease, within the renewed one
  }

  it('answers a duplicate in_flight itself after the first lease, even with the store down', async () => {
    await claimAndRenewPastFirstLease();
    inner.down = true;
    const claimsBefore = inner.claims;

    const duplicate = await store.claim(claimRequest('duplicate'));
    expect(duplicate.outcome).toBe('in_flight');
    expect(inner.claims).toBe(claimsBefore);
  });

  it('caches the completion of a renewed lease: the replay does not reach the store', async () => {
    await claimAndRenewPastFirstLease();
    expect(await store.complete(owner, RESPONSE, 3_600)).toBe(true);
    inner.down = true;
    const claimsBefore = inner.claims;

    const replay = await store.claim(claimRequest('retry'));
    expect(replay).toMatchObject({ outcome: 'completed', response: RESPONSE });
    expect(inner.claims).toBe(claimsBefore);
  });
});

/**
 * Its `memory` ability is what the interceptor asks first, without a promise: it must say
 * exactly what a claim would answer from this instance's knowledge, and nothing otherwise.
 */
describe('LocalFirstIdempotencyStore memory', () => {
  let time: number;
  let inner: CountingStore;
  let store: LocalFirstIdempotencyStore;
  const request = (ownerToken: string, fingerprint = 'fp'): ClaimRequest => ({
    scope: 's',
    key: 'k',
    fingerprint,
    method: 'POST',
    path: '/orders',
    ownerToken,
    lockTimeoutSeconds: LOCK_TIMEOUT_SECONDS,
    ttlSeconds: 3_600,
  });
  const memory = () => store.capabilities().memory!;

  beforeEach(() => {
    time = 10_000;
    const now = () => time;
    inner = new CountingStore(now);
    store = new LocalFirstIdempotencyStore(inner, { maxEntries: 100, maxBytes: 1 << 20 }, now);
  });

  it('knows nothing of a key this instance has not claimed or replayed', () => {
    expect(memory().answer('s', 'k', 'fp')).toBeUndefined();
    expect(inner.claims).toBe(0);
  });

  it('answers in_flight or mismatch while its own claim runs, and nothing once the lease lapsed', async () => {
    const won = await store.claim(request('owner'));
    expect(won.outcome).toBe('claimed');
    const recordId = (won as { recordId: string }).recordId;

    expect(memory().answer('s', 'k', 'fp')).toEqual({ outcome: 'in_flight', recordId });
    expect(memory().answer('s', 'k', 'other')).toEqual({ outcome: 'mismatch', recordId });
    expect(inner.claims).toBe(1);

    time += LOCK_TIMEOUT_SECONDS * 1000 + 1;
    expect(memory().answer('s', 'k', 'fp')).toBeUndefined();
  });

  it('answers nothing while its own claim of the key is on its way', async () => {
    const pending = store.claim(request('owner'));
    expect(memory().answer('s', 'k', 'fp')).toBeUndefined();
    expect((await pending).outcome).toBe('claimed');
  });

  it('answers completed with the response after the completion, and mismatch for another payload', async () => {
    const won = await store.claim(request('owner'));
    const recordId = (won as { recordId: string }).recordId;
    expect(await store.complete({ scope: 's', key: 'k', ownerToken: 'owner' }, RESPONSE, 60)).toBe(
      true,
    );
    inner.down = true;

    expect(memory().answer('s', 'k', 'fp')).toEqual({
      outcome: 'completed',
      recordId,
      response: RESPONSE,
    });
    expect(memory().answer('s', 'k', 'other')).toEqual({ outcome: 'mismatch', recordId });

    time += 60_000;
    expect(memory().answer('s', 'k', 'fp')).toBeUndefined();
  });
});
