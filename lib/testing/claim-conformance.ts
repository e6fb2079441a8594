import { randomUUID } from 'node:crypto';
import { SHORT, LAPSE, LONG, FP_B, RESPONSE, again, refOf, request } from './conformance-fixtures';
import type { ConformanceSuite } from './conformance-fixtures';

/**
 * How a claim answers (claimed, in_flight, and mismatch before in_flight whatever the record's
 * state), that a completed record replays byte for byte, and that a key in two scopes is two
 * records.
 */
export function describeClaims(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('claims a fresh key as attempt 1', async () => {
    const result = await suite.store.claim(request());
    expect(result.outcome).toBe('claimed');
    const { recordId } = result as { recordId: string };
    expect(typeof recordId).toBe('string');
    expect(result).toEqual({ outcome: 'claimed', recordId, attempt: 1 });
  });

  it('reports in_flight to the same request while the lease is live', async () => {
    const { req, recordId } = await suite.claimNew();
    expect(await suite.store.claim(again(req))).toEqual({ outcome: 'in_flight', recordId });
  });

  it('reports mismatch before in_flight for another fingerprint', async () => {
    const { req, recordId } = await suite.claimNew();
    const other = again(req, { fingerprint: FP_B });
    expect(await suite.store.claim(other)).toEqual({ outcome: 'mismatch', recordId });
  });

  it('reports mismatch for another fingerprint on a completed record', async () => {
    const req = await suite.claimFresh();
    expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });

  it('reports mismatch for another fingerprint on a released record', async () => {
    const req = await suite.claimFresh();
    expect(await suite.store.release(refOf(req), 'retry')).toBe(true);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });

  it('reports mismatch (no takeover) for another fingerprint after the lease lapsed', async () => {
    const req = await suite.claimFresh({ lockTimeoutSeconds: SHORT });
    await suite.advance(LAPSE);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });

  // A completed record replays byte for byte, and a key in two scopes is two records.
  it('replays a completed record with identical status, headers and body bytes', async () => {
    const { req, recordId } = await suite.claimNew();
    expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    const replay = await suite.replayed(req);
    expect(replay.recordId).toBe(recordId);
    expect(replay.response.status).toBe(RESPONSE.status);
    expect(replay.response.headers).toEqual(RESPONSE.headers);
    expect(Buffer.isBuffer(replay.response.body)).toBe(true);
    expect(replay.response.body.equals(RESPONSE.body)).toBe(true);
  });

  it('replays an empty body as zero bytes', async () => {
    const req = await suite.claimFresh();
    const empty = { status: 204, headers: {}, body: Buffer.alloc(0) };
    await suite.store.complete(refOf(req), empty, LONG);
    const replay = await suite.replayed(req);
    expect(replay.response.status).toBe(204);
    expect(replay.response.body.length).toBe(0);
  });

  it('keeps scopes independent: one key in two scopes is two records', async () => {
    const req = request({ scope: 'alice' });
    const bob = again(req, { scope: 'bob' });
    const a = await suite.claimed(req);
    const b = await suite.claimed(bob);
    expect(a.recordId).not.toBe(b.recordId);
    await suite.store.complete(refOf(req), RESPONSE, LONG);
    // Bob never sees Alice's stored response.
    expect((await suite.store.claim(again(bob))).outcome).toBe('in_flight');
    expect((await suite.store.claim(again(req))).outcome).toBe('completed');
  });
}

/** Only the claim's owner token may complete, release or renew a record. */
export function describeOwnerGuard(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('refuses complete with a wrong owner token and leaves the record in flight', async () => {
    const req = await suite.claimFresh();
    const wrong = { ...refOf(req), ownerToken: randomUUID() };
    expect(await suite.store.complete(wrong, RESPONSE, LONG)).toBe(false);
    expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
    expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
  });

  it('refuses release with a wrong owner token and leaves the record in flight', async () => {
    const req = await suite.claimFresh();
    const wrong = { ...refOf(req), ownerToken: randomUUID() };
    expect(await suite.store.release(wrong, 'retry')).toBe(false);
    expect(await suite.store.release(wrong, 'forget')).toBe(false);
    expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });

  it('refuses renew with a wrong owner token and does not extend the lease', async () => {
    const req = await suite.claimFresh({ lockTimeoutSeconds: SHORT });
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
    expect((await suite.claimed(req)).attempt).toBe(1);
  });
}

/** A lapsed lease is taken over by the same request, and the old owner is then locked out. */
export function describeLeaseTakeover(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('lets the same request take over a lapsed lease: new owner, attempt 2, same recordId', async () => {
    const { req, recordId } = await suite.claimNew({ lockTimeoutSeconds: SHORT });
    await suite.advance(LAPSE);
    const takeover = again(req);
    expect(await suite.store.claim(takeover)).toEqual({
      outcome: 'claimed',
      recordId,
      attempt: 2,
    });
  });

  it('stops the old owner from completing, renewing or releasing after a takeover', async () => {
    const old = await suite.claimFresh({ lockTimeoutSeconds: SHORT });
    await suite.advance(LAPSE);
    const current = again(old, { lockTimeoutSeconds: LONG });
    await suite.claimed(current);

    expect(await suite.store.complete(refOf(old), RESPONSE, LONG)).toBe(false);
    expect(await suite.store.renew(refOf(old), LONG)).toBe(false);
    expect(await suite.store.release(refOf(old), 'retry')).toBe(false);
    expect(await suite.store.release(refOf(old), 'forget')).toBe(false);

    // Nothing changed: the new owner still holds a live lease ...
    expect((await suite.store.claim(again(old))).outcome).toBe('in_flight');
    // ... and can still complete with its own response.
    const mine = { status: 200, headers: {}, body: Buffer.from('mine') };
    expect(await suite.store.complete(refOf(current), mine, LONG)).toBe(true);
    const replay = await suite.replayed(old);
    expect(replay.response.status).toBe(200);
    expect(replay.response.body.toString()).toBe('mine');
  });

  it('renew extends the lease past the point where the old lease would have lapsed', async () => {
    const req = await suite.claimFresh({ lockTimeoutSeconds: 0.5 });
    await suite.advance(0.25);
    expect(await suite.store.renew(refOf(req), 1)).toBe(true);
    await suite.advance(0.4); // 0.65 s after the claim: the original 0.5 s lease has lapsed
    expect((await suite.store.claim(again(req))).outcome).toBe('in_flight');
  });
}
