/**
 * LeaseHeartbeat's estimate of the lease left must err short: a lease is counted from when the
 * claim or the renewal was sent, never from when its reply arrived, or a foreign step may start
 * on a lease that has less left than the heartbeat says. Fake timers move the clock; the store's
 * renewal takes RENEW_DELAY_MS to answer.
 */
import { LeaseHeartbeat } from '../../lib/execution/lease-heartbeat';
import type { IdempotencyRecordRef } from '../../lib/interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../../lib/storage/idempotency.store';

const LOCK_TIMEOUT_SECONDS = 1;
const LEASE_MS = LOCK_TIMEOUT_SECONDS * 1000;
const RENEW_DELAY_MS = 300;
const REF: IdempotencyRecordRef = { scope: 's', key: 'k', ownerToken: 'owner' };

describe('LeaseHeartbeat', () => {
  let renewals: number;
  let heartbeat: LeaseHeartbeat;

  /** A store whose renewal is granted, RENEW_DELAY_MS after it was sent. */
  const slowStore = {
    renew: () => {
      renewals++;
      return new Promise<boolean>((resolve) => setTimeout(() => resolve(true), RENEW_DELAY_MS));
    },
  } as unknown as IdempotencyStore;

  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
    renewals = 0;
    heartbeat = new LeaseHeartbeat(
      slowStore,
      REF,
      LOCK_TIMEOUT_SECONDS,
      3_600,
      () => undefined,
      () => undefined,
    );
  });

  afterEach(() => {
    heartbeat.stop();
    jest.useRealTimers();
  });

  it('counts the first lease from when the claim was sent', () => {
    heartbeat.start(Date.now() - 400);
    expect(heartbeat.remainingMs()).toBeLessThanOrEqual(LEASE_MS - 400);
  });

  it('counts a lease renewed on demand from when the renewal was sent, not from its reply', async () => {
    heartbeat.start(Date.now() - 900);
    const ensured = heartbeat.ensureRemaining(500);
    await jest.advanceTimersByTimeAsync(RENEW_DELAY_MS);
    expect(await ensured).toBe(true);
    expect(renewals).toBe(1);
    const remaining = heartbeat.remainingMs();
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThanOrEqual(LEASE_MS - RENEW_DELAY_MS);
  });

  it('counts a lease renewed by the heartbeat from when the renewal was sent', async () => {
    heartbeat.start();
    // The first beat sends a renewal a third of a lease in; its reply comes RENEW_DELAY_MS later.
    const beatAfterMs = Math.floor(LEASE_MS / 3);
    await jest.advanceTimersByTimeAsync(beatAfterMs + RENEW_DELAY_MS);
    expect(renewals).toBe(1);
    expect(heartbeat.remainingMs()).toBeLessThanOrEqual(LEASE_MS - RENEW_DELAY_MS);
  });
});
