import { randomUUID } from 'node:crypto';
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
