import { LONG, FP_B, RESPONSE, again, claimedOf, refOf, request } from './conformance-fixtures';
import type { ConformanceSuite } from './conformance-fixtures';

/** Giving a key back: `retry` keeps the fingerprint; `forget` deletes a first attempt's record. */
export function describeRelease(suite: ConformanceSuite): void {
  const { describe, it, expect } = suite;
  describe('release', () => {
    it("'retry' keeps the fingerprint: another payload mismatches, the same one reclaims", async () => {
      const req = request();
      const first = claimedOf(await suite.store.claim(req));
      expect(await suite.store.release(refOf(req), 'retry')).toBe(true);
      expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
      expect(await suite.store.claim(again(req))).toEqual({
        outcome: 'claimed',
        recordId: first.recordId,
        attempt: 2,
      });
    });

    it("'forget' on attempt 1 deletes the record: another payload can then claim", async () => {
      const req = request();
      claimedOf(await suite.store.claim(req));
      expect(await suite.store.release(refOf(req), 'forget')).toBe(true);
      // A new record, though its id may be the old one's: the forgotten record's handler never
      // started, so no derived key of it was ever used.
      const next = claimedOf(await suite.store.claim(again(req, { fingerprint: FP_B })));
      expect(next.attempt).toBe(1);
    });

    it("'forget' on attempt 2 or later keeps the record released", async () => {
      const req = request();
      const first = claimedOf(await suite.store.claim(req));
      await suite.store.release(refOf(req), 'retry');
      const second = again(req);
      expect(claimedOf(await suite.store.claim(second)).attempt).toBe(2);
      expect(await suite.store.release(refOf(second), 'forget')).toBe(true);
      expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
      expect(await suite.store.claim(again(req))).toEqual({
        outcome: 'claimed',
        recordId: first.recordId,
        attempt: 3,
      });
    });

    it('a released record cannot be completed by its former owner', async () => {
      const req = request();
      await suite.store.claim(req);
      await suite.store.release(refOf(req), 'retry');
      expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(false);
      expect((await suite.store.claim(again(req))).outcome).toBe('claimed');
    });
  });
}
