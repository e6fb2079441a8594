import { randomUUID } from 'node:crypto';
import {
  SHORT,
  LAPSE,
  LONG,
  RESPONSE,
  again,
  claimedOf,
  refOf,
  request,
} from './conformance-fixtures';
import type { ConformanceSuite } from './conformance-fixtures';

/** Completion inside the handler's transaction: it counts once committed, and stays owner-guarded. */
export function describeTransactions(suite: ConformanceSuite): void {
  const { describe, it, expect } = suite;
  describe('transactions', () => {
    it('complete + commit makes the record completed', async () => {
      const req = request();
      await suite.store.claim(req);
      const tx = await suite.store.beginTransaction();
      expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
      await tx.commit();
      const replay = await suite.store.claim(again(req));
      expect(replay.outcome).toBe('completed');
      if (replay.outcome === 'completed') {
        expect(replay.response.body.equals(RESPONSE.body)).toBe(true);
      }
    });

    it('complete + rollback leaves the record in flight and its owner in charge', async () => {
      const req = request();
      await suite.store.claim(req);
      const tx = await suite.store.beginTransaction();
      expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
      await tx.rollback();
      expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
      expect(await suite.store.release(refOf(req), 'retry')).toBe(true);
    });

    it('complete inside a transaction refuses an owner whose lease was taken over', async () => {
      const old = request({ lockTimeoutSeconds: SHORT });
      await suite.store.claim(old);
      const tx = await suite.store.beginTransaction();
      await suite.advance(LAPSE);
      const current = again(old, { lockTimeoutSeconds: LONG });
      claimedOf(await suite.store.claim(current));
      expect(await tx.complete(refOf(old), RESPONSE, LONG)).toBe(false);
      await tx.commit();
      expect((await suite.store.claim(again(old))).outcome).toBe('in_flight');
      expect(await suite.store.complete(refOf(current), RESPONSE, LONG)).toBe(true);
    });

    it('a completion accepted in a transaction is not lost to a takeover tried before commit', async () => {
      const req = request({ lockTimeoutSeconds: SHORT });
      await suite.store.claim(req);
      const tx = await suite.store.beginTransaction();
      expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
      await suite.advance(LAPSE);
      // The lease has lapsed while the transaction is still open. A store may make this claim
      // wait for the transaction, or refuse the commit; it may not let both owners win.
      const racing = suite.store.claim(again(req));
      const committed = await tx.commit().then(
        () => true,
        () => false,
      );
      const raced = await racing;
      if (committed) {
        expect(raced.outcome).toBe('completed');
        expect((await suite.store.claim(again(req))).outcome).toBe('completed');
      } else {
        expect(raced.outcome).toBe('claimed');
      }
    });

    it('complete inside a transaction is owner-guarded', async () => {
      const req = request();
      await suite.store.claim(req);
      const tx = await suite.store.beginTransaction();
      const wrong = { ...refOf(req), ownerToken: randomUUID() };
      expect(await tx.complete(wrong, RESPONSE, LONG)).toBe(false);
      await tx.commit();
      expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
    });
  });
}
