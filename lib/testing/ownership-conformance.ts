import { randomUUID } from 'node:crypto';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
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

/** Only the claim's owner token may complete, release or renew a record. */
export function describeOwnerGuard(suite: ConformanceSuite): void {
  const { describe, it, expect } = suite;
  describe('owner guard', () => {
    it('refuses complete with a wrong owner token and leaves the record in flight', async () => {
      const req = request();
      await suite.store.claim(req);
      const wrong = { ...refOf(req), ownerToken: randomUUID() };
      expect(await suite.store.complete(wrong, RESPONSE, LONG)).toBe(false);
      expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
      expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    });

    it('refuses release with a wrong owner token and leaves the record in flight', async () => {
      const req = request();
      await suite.store.claim(req);
      const wrong = { ...refOf(req), ownerToken: randomUUID() };
      expect(await suite.store.release(wrong, 'retry')).toBe(false);
      expect(await suite.store.release(wrong, 'forget')).toBe(false);
      expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
      expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
    });

    it('refuses renew with a wrong owner token and does not extend the lease', async () => {
      const req = request({ lockTimeoutSeconds: SHORT });
      await suite.store.claim(req);
      const wrong = { ...refOf(req), ownerToken: randomUUID() };
      expect(await suite.store.renew(wrong, LONG)).toBe(false);
      await suite.advance(LAPSE);
      expect((await suite.store.claim(again(req))).outcome).toBe('claimed');
    });

    it('refuses writes on a key that was never claimed', async () => {
      const req = request();
      expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(false);
      expect(await suite.store.renew(refOf(req), LONG)).toBe(false);
      expect(await suite.store.release(refOf(req), 'retry')).toBe(false);
      expect(claimedOf(await suite.store.claim(req)).attempt).toBe(1);
    });
  });
}

/** A lapsed lease is taken over by the same request, and the old owner is then locked out. */
export function describeLeaseTakeover(suite: ConformanceSuite): void {
  const { describe, it, expect } = suite;
  describe('lease lapse and takeover', () => {
    it('lets the same request take over a lapsed lease: new owner, attempt 2, same recordId', async () => {
      const req = request({ lockTimeoutSeconds: SHORT });
      const first = claimedOf(await suite.store.claim(req));
      await suite.advance(LAPSE);
      const takeover = again(req);
      expect(await suite.store.claim(takeover)).toEqual({
        outcome: 'claimed',
        recordId: first.recordId,
        attempt: 2,
      });
    });

    it('stops the old owner from completing, renewing or releasing after a takeover', async () => {
      const old = request({ lockTimeoutSeconds: SHORT });
      await suite.store.claim(old);
      await suite.advance(LAPSE);
      const current = again(old, { lockTimeoutSeconds: LONG });
      claimedOf(await suite.store.claim(current));

      expect(await suite.store.complete(refOf(old), RESPONSE, LONG)).toBe(false);
      expect(await suite.store.renew(refOf(old), LONG)).toBe(false);
      expect(await suite.store.release(refOf(old), 'retry')).toBe(false);
      expect(await suite.store.release(refOf(old), 'forget')).toBe(false);

      // Nothing changed: the new owner still holds a live lease ...
      expect((await suite.store.claim(again(old))).outcome).toBe('in_flight');
      // ... and can still complete with its own response.
      const mine: StoredResponse = { status: 200, headers: {}, body: Buffer.from('mine') };
      expect(await suite.store.complete(refOf(current), mine, LONG)).toBe(true);
      const replay = await suite.store.claim(again(old));
      expect(replay.outcome).toBe('completed');
      if (replay.outcome === 'completed') {
        expect(replay.response.status).toBe(200);
        expect(replay.response.body.toString()).toBe('mine');
      }
    });

    it('renew extends the lease past the point where the old lease would have lapsed', async () => {
      const req = request({ lockTimeoutSeconds: 0.5 });
      await suite.store.claim(req);
      await suite.advance(0.25);
      expect(await suite.store.renew(refOf(req), 1)).toBe(true);
      await suite.advance(0.4); // 0.65 s after the claim: the original 0.5 s lease has lapsed
      expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
    });
  });
}
