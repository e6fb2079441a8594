import { randomUUID } from 'node:crypto';
import { SHORT, LAPSE, LONG, FP_B, RESPONSE, again, refOf, request } from './conformance-fixtures';
import type { ConformanceSuite } from './conformance-fixtures';

/** Giving a key back: `retry` keeps the fingerprint; `forget` deletes a first attempt's record. */
export function describeRelease(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it("'retry' keeps the fingerprint: another payload mismatches, the same one reclaims", async () => {
    const { req, recordId } = await suite.claimNew();
    expect(await suite.store.release(refOf(req), 'retry')).toBe(true);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
    const second = again(req);
    expect(await suite.store.claim(second)).toEqual({ outcome: 'claimed', recordId, attempt: 2 });
  });

  it("'forget' on attempt 1 deletes the record: another payload can then claim", async () => {
    const { req } = await suite.claimNew();
    expect(await suite.store.release(refOf(req), 'forget')).toBe(true);
    // A new record, though its id may be the old one's: the forgotten record's handler never
    // started, so no derived key of it was ever used.
    const next = await suite.claimed(again(req, { fingerprint: FP_B }));
    expect(next.attempt).toBe(1);
  });

  it("'forget' on attempt 2 or later keeps the record released", async () => {
    const { req, recordId } = await suite.claimNew();
    await suite.store.release(refOf(req), 'retry');
    const second = again(req);
    expect((await suite.claimed(second)).attempt).toBe(2);
    expect(await suite.store.release(refOf(second), 'forget')).toBe(true);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
    const third = again(req);
    expect(await suite.store.claim(third)).toEqual({ outcome: 'claimed', recordId, attempt: 3 });
  });

  it('a released record cannot be completed by its former owner', async () => {
    const req = await suite.claimFresh();
    await suite.store.release(refOf(req), 'retry');
    expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(false);
    expect((await suite.store.claim(again(req))).outcome).toBe('claimed');
  });
}

/** A record past its TTL is absent, and purge deletes expired records in batches, never a live lease. */
export function describeExpiryAndPurge(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('treats a completed record past its TTL as absent: new recordId, attempt 1', async () => {
    const { req, recordId } = await suite.claimNew();
    await suite.store.complete(refOf(req), RESPONSE, SHORT);
    expect((await suite.store.claim(again(req))).outcome).toBe('completed');
    await suite.advance(LAPSE);
    const next = await suite.claimed(again(req, { fingerprint: FP_B }));
    expect(next.attempt).toBe(1);
    expect(next.recordId).not.toBe(recordId);
  });

  it('purges expired completed and released records in batches, never a live lease', async () => {
    const completed = [request(), request(), request()];
    for (const req of completed) {
      await suite.store.claim(req);
      expect(await suite.store.complete(refOf(req), RESPONSE, SHORT)).toBe(true);
    }
    const released = await suite.claimFresh({ ttlSeconds: SHORT });
    await suite.store.release(refOf(released), 'retry');
    await suite.claimFresh({ ttlSeconds: SHORT, lockTimeoutSeconds: SHORT }); // lapsed in flight
    const liveLease = await suite.claimFresh({ ttlSeconds: SHORT, lockTimeoutSeconds: LONG });
    const stillFresh = await suite.claimFresh();
    await suite.store.complete(refOf(stillFresh), RESPONSE, LONG);

    await suite.advance(LAPSE);

    expect(await suite.store.purgeExpired(2)).toBe(2);
    expect(await suite.store.purgeExpired(100)).toBe(3);
    expect(await suite.store.purgeExpired(100)).toBe(0);

    expect((await suite.store.claim(again(liveLease))).outcome).toBe('in_flight');
    expect(await suite.store.complete(refOf(liveLease), RESPONSE, LONG)).toBe(true);
    expect((await suite.store.claim(again(stillFresh))).outcome).toBe('completed');
    // The purged released record is gone: another payload may now use its key.
    expect((await suite.claimed(again(released, { fingerprint: FP_B }))).attempt).toBe(1);
  });

  it('purges nothing and returns 0 when nothing expired', async () => {
    const req = await suite.claimFresh();
    await suite.store.complete(refOf(req), RESPONSE, LONG);
    expect(await suite.store.purgeExpired(100)).toBe(0);
    expect((await suite.store.claim(again(req))).outcome).toBe('completed');
  });
}

/** Completion inside the handler's transaction: it counts once committed, and stays owner-guarded. */
export function describeTransactions(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('complete + commit makes the record completed', async () => {
    const req = await suite.claimFresh();
    const tx = await suite.store.beginTransaction();
    expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    await tx.commit();
    const replay = await suite.replayed(req);
    expect(replay.response.body.equals(RESPONSE.body)).toBe(true);
  });

  it('complete + rollback leaves the record in flight and its owner in charge', async () => {
    const req = await suite.claimFresh();
    const tx = await suite.store.beginTransaction();
    expect(await tx.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    await tx.rollback();
    expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
    expect(await suite.store.release(refOf(req), 'retry')).toBe(true);
  });

  it('complete inside a transaction refuses an owner whose lease was taken over', async () => {
    const old = await suite.claimFresh({ lockTimeoutSeconds: SHORT });
    const tx = await suite.store.beginTransaction();
    await suite.advance(LAPSE);
    const current = again(old, { lockTimeoutSeconds: LONG });
    await suite.claimed(current);
    expect(await tx.complete(refOf(old), RESPONSE, LONG)).toBe(false);
    await tx.commit();
    expect((await suite.store.claim(again(old))).outcome).toBe('in_flight');
    expect(await suite.store.complete(refOf(current), RESPONSE, LONG)).toBe(true);
  });

  it('a completion accepted in a transaction is not lost to a takeover tried before commit', async () => {
    const req = await suite.claimFresh({ lockTimeoutSeconds: SHORT });
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
    const req = await suite.claimFresh();
    const tx = await suite.store.beginTransaction();
    const wrong = { ...refOf(req), ownerToken: randomUUID() };
    expect(await tx.complete(wrong, RESPONSE, LONG)).toBe(false);
    await tx.commit();
    expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
  });

  it("does not count a handler's own error as the store being unreachable", async () => {
    // isUnavailable() turns a failed transactional handler into a 503 the client retries: a
    // store that claims every error would make a handler's own bug a retry loop.
    expect(suite.store.isUnavailable(new Error('amount must be positive'))).toBe(false);
  });
}
