/**
 * `Prefer: wait=N` (RFC 7240) as the waiting routes read it, and the wait a request gets: its
 * preference, or the route's default without one, capped by the route's maximum.
 */
import { preferredWaitSeconds } from '../../lib/waiting/prefer-wait';
import { waitBudgetOf } from '../../lib/execution/wait-for-claim';

describe('preferredWaitSeconds', () => {
  it.each([
    ['wait=10', 10],
    ['wait=0', 0],
    ['WAIT=5', 5],
    [' wait = 7 ', 7],
    ['wait="12"', 12],
    ['respond-async, wait=3', 3],
    ['handling=lenient; foo="a,b", wait=4', 4],
    ['wait=6; ignored=param', 6],
    ['return=minimal,wait=8', 8],
    ['wait=2, wait=9', 2],
  ])('reads %j as %d seconds', (header, seconds) => {
    expect(preferredWaitSeconds(header)).toBe(seconds);
  });

  it.each([
    [undefined],
    [''],
    ['respond-async'],
    ['wait'],
    ['wait='],
    ['wait=-1'],
    ['wait=1.5'],
    ['wait=abc'],
    ['wait="10'],
    ['wait=1e3'],
    ['waiting=10'],
    ['x-wait=10'],
    ['foo="wait=10"'],
    // Only the first wait counts, even when it cannot be read.
    ['wait=soon, wait=5'],
  ])('finds no readable wait in %j', (header) => {
    expect(preferredWaitSeconds(header)).toBeUndefined();
  });

  it('reads several Prefer headers as one list', () => {
    expect(preferredWaitSeconds(['respond-async', 'wait=11'])).toBe(11);
  });
});

describe('waitBudgetOf', () => {
  const wait = { maxSeconds: 10, defaultSeconds: 2, pollIntervalSeconds: 0.5 };

  it('gives the preferred wait, capped by maxSeconds', () => {
    expect(waitBudgetOf('wait=5', wait)).toEqual({ seconds: 5, preferred: true });
    expect(waitBudgetOf('wait=3600', wait)).toEqual({ seconds: 10, preferred: true });
    expect(waitBudgetOf('wait=0', wait)).toEqual({ seconds: 0, preferred: true });
  });

  it('gives defaultSeconds without a preference (or with one it cannot read)', () => {
    expect(waitBudgetOf(undefined, wait)).toEqual({ seconds: 2, preferred: false });
    expect(waitBudgetOf('wait=soon', wait)).toEqual({ seconds: 2, preferred: false });
    expect(waitBudgetOf(undefined, { ...wait, defaultSeconds: 60 })).toEqual({
      seconds: 10,
      preferred: false,
    });
  });

  it('gives nothing on a route that does not wait, whatever the request asks', () => {
    expect(waitBudgetOf('wait=10', { ...wait, maxSeconds: 0 }).seconds).toBe(0);
  });
});
