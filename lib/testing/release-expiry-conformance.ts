import {
  SHORT,
  LAPSE,
  LONG,
  FP_B,
  RESPONSE,
  again,
  claimedOf,
  refOf,
  request,
} from './conformance-fixtures';
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
      const first = claimedOf(await suite.store.claim(req));
      expect(await suite.store.release(refOf(req), 'forget')).toBe(true);
      const next = claimedOf(await suite.store.claim(again(req, { fingerprint: FP_B })));
      expect(next.attempt).toBe(1);
      expect(next.recordId).not.toBe(first.recordId);
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

/** A record past its TTL is absent, and purge deletes expired records in batches, never a live lease. */
export function describeExpiryAndPurge(suite: ConformanceSuite): void {
  const { describe, it, expect } = suite;
  describe('TTL and purge', () => {
    it('treats a completed record past its TTL as absent: new recordId, attempt 1', async () => {
      const req = request();
      const first = claimedOf(await suite.store.claim(req));
      await suite.store.complete(refOf(req), RESPONSE, SHORT);
      expect((await suite.store.claim(again(req))).outcome).toBe('completed');
      await suite.advance(LAPSE);
      const next = claimedOf(await suite.store.claim(again(req, { fingerprint: FP_B })));
      expect(next.attempt).toBe(1);
      expect(next.recordId).not.toBe(first.recordId);
    });

    it('purges expired completed and released records in batches, never a live lease', async () => {
      const completed = [request(), request(), request()];
      for (const req of completed) {
        await suite.store.claim(req);
        expect(await suite.store.complete(refOf(req), RESPONSE, SHORT)).toBe(true);
      }
      const released = request({ ttlSeconds: SHORT });
      await suite.store.claim(released);
      await suite.store.release(refOf(released), 'retry');
      const lapsedInFlight = request({ ttlSeconds: SHORT, lockTimeoutSeconds: SHORT });
      await suite.store.claim(lapsedInFlight);
      const liveLease = request({ ttlSeconds: SHORT, lockTimeoutSeconds: LONG });
      await suite.store.claim(liveLease);
      const stillFresh = request();
      await suite.store.claim(stillFresh);
      await suite.store.complete(refOf(stillFresh), RESPONSE, LONG);

      await suite.advance(LAPSE);

      expect(await suite.store.purgeExpired(2)).toBe(2);
      expect(await suite.store.purgeExpired(100)).toBe(3);
      expect(await suite.store.purgeExpired(100)).toBe(0);

      expect((await suite.store.claim(again(liveLease))).outcome).toBe('in_flight');
      expect(await suite.store.complete(refOf(liveLease), RESPONSE, LONG)).toBe(true);
      expect((await suite.store.claim(again(stillFresh))).outcome).toBe('completed');
      // The purged released record is gone: another payload may now use its key.
      expect(
        claimedOf(await suite.store.claim(again(released, { fingerprint: FP_B }))).attempt,
      ).toBe(1);
    });

    it('purges nothing and returns 0 when nothing expired', async () => {
      const req = request();
      await suite.store.claim(req);
      await suite.store.complete(refOf(req), RESPONSE, LONG);
      expect(await suite.store.purgeExpired(100)).toBe(0);
      expect((await suite.store.claim(again(req))).outcome).toBe('completed');
    });
  });
}
