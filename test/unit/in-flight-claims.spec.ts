import { InFlightClaims } from '../../lib/storage/local/in-flight-claims';

describe('InFlightClaims', () => {
  let time = 0;
  const now = () => time;
  beforeEach(() => (time = 1_000));

  const claimed = (ownerToken: string, lockTimeoutSeconds = 1) =>
    ({ claimed: true, fingerprint: 'fp', ownerToken, recordId: 'r1', lockTimeoutSeconds }) as const;

  it('holds a claim on its way, and lets duplicates wait for its answer', async () => {
    const claims = new InFlightClaims(now);
    const end = claims.begin('s', 'k')!;
    const entry = claims.get('s', 'k');
    expect(entry?.state).toBe('claiming');
    expect(claims.begin('s', 'k')).toBeUndefined();
    let woke = false;
    const waiting = (entry as { settled: Promise<void> }).settled.then(() => (woke = true));
    await Promise.resolve();
    expect(woke).toBe(false);
    end(claimed('owner-1'));
    await waiting;
    expect(claims.get('s', 'k')).toEqual({
      state: 'running',
      fingerprint: 'fp',
      ownerToken: 'owner-1',
      recordId: 'r1',
      leaseEndsAt: 2_000,
    });
  });

  it('forgets a claim that did not end in a running handler', () => {
    const claims = new InFlightClaims(now);
    claims.begin('s', 'k')!({ claimed: false });
    expect(claims.get('s', 'k')).toBeUndefined();
    expect(claims.size).toBe(0);
  });

  it('measures the local lease from before the claim was sent', () => {
    const claims = new InFlightClaims(now);
    const end = claims.begin('s', 'k')!;
    time += 400; // the claim's round trip
    end(claimed('owner-1'));
    time = 1_999;
    expect(claims.get('s', 'k')?.state).toBe('running');
    time = 2_000;
    expect(claims.get('s', 'k')).toBeUndefined();
    expect(claims.size).toBe(0);
  });

  it('lets a successor claim once the local lease ran out, and keeps it when the stale owner ends', () => {
    const claims = new InFlightClaims(now);
    claims.begin('s', 'k')!(claimed('stale'));
    time += 1_000;
    claims.begin('s', 'k')!(claimed('successor'));
    claims.end('s', 'k', 'stale');
    expect(claims.get('s', 'k')).toMatchObject({ state: 'running', ownerToken: 'successor' });
    claims.end('s', 'k', 'successor');
    expect(claims.get('s', 'k')).toBeUndefined();
  });

  it('moves the local lease forward when its owner renews it, never back', () => {
    const claims = new InFlightClaims(now);
    claims.begin('s', 'k')!(claimed('owner-1'));
    time = 1_600;
    claims.extend('s', 'k', 'owner-1', 1, 1_500);
    time = 2_400;
    expect(claims.get('s', 'k')?.state).toBe('running');
    claims.extend('s', 'k', 'someone-else', 10, 2_400);
    claims.extend('s', 'k', 'owner-1', 0.1, 2_400);
    time = 2_500;
    expect(claims.get('s', 'k')).toBeUndefined();
  });

  it('keeps scopes and keys apart', () => {
    const claims = new InFlightClaims(now);
    claims.begin('a:b', 'c')!(claimed('one'));
    expect(claims.get('a', 'b:c')).toBeUndefined();
    expect(claims.get('a:b', 'c')?.state).toBe('running');
  });
});
