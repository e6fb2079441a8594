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

/** How a claim answers: claimed, in_flight, and mismatch before in_flight whatever the record's state. */
export function describeClaimOutcomes(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('claims a fresh key as attempt 1', async () => {
    const result = await suite.store.claim(request());
    expect(result.outcome).toBe('claimed');
    const { recordId } = claimedOf(result);
    expect(typeof recordId).toBe('string');
    expect(result).toEqual({ outcome: 'claimed', recordId, attempt: 1 });
  });

  it('reports in_flight to the same request while the lease is live', async () => {
    const req = request();
    const first = claimedOf(await suite.store.claim(req));
    expect(await suite.store.claim(again(req))).toEqual({
      outcome: 'in_flight',
      recordId: first.recordId,
    });
  });

  it('reports mismatch before in_flight for another fingerprint', async () => {
    const req = request();
    const first = claimedOf(await suite.store.claim(req));
    expect(await suite.store.claim(again(req, { fingerprint: FP_B }))).toEqual({
      outcome: 'mismatch',
      recordId: first.recordId,
    });
  });

  it('reports mismatch for another fingerprint on a completed record', async () => {
    const req = request();
    await suite.store.claim(req);
    expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });

  it('reports mismatch for another fingerprint on a released record', async () => {
    const req = request();
    await suite.store.claim(req);
    expect(await suite.store.release(refOf(req), 'retry')).toBe(true);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });

  it('reports mismatch (no takeover) for another fingerprint after the lease lapsed', async () => {
    const req = request({ lockTimeoutSeconds: SHORT });
    await suite.store.claim(req);
    await suite.advance(LAPSE);
    expect((await suite.store.claim(again(req, { fingerprint: FP_B }))).outcome).toBe('mismatch');
  });
}

/** A completed record replays byte for byte, and a key in two scopes is two records. */
export function describeClaimReplays(suite: ConformanceSuite): void {
  const { it, expect } = suite;
  it('replays a completed record with identical status, headers and body bytes', async () => {
    const req = request();
    const first = claimedOf(await suite.store.claim(req));
    expect(await suite.store.complete(refOf(req), RESPONSE, LONG)).toBe(true);
    const replay = await suite.store.claim(again(req));
    expect(replay.outcome).toBe('completed');
    if (replay.outcome !== 'completed') return;
    expect(replay.recordId).toBe(first.recordId);
    expect(replay.response.status).toBe(RESPONSE.status);
    expect(replay.response.headers).toEqual(RESPONSE.headers);
    expect(Buffer.isBuffer(replay.response.body)).toBe(true);
    expect(replay.response.body.equals(RESPONSE.body)).toBe(true);
  });

  it('replays an empty body as zero bytes', async () => {
    const req = request();
    await suite.store.claim(req);
    await suite.store.complete(
      refOf(req),
      { status: 204, headers: {}, body: Buffer.alloc(0) },
      LONG,
    );
    const replay = await suite.store.claim(again(req));
    expect(replay.outcome).toBe('completed');
    if (replay.outcome !== 'completed') return;
    expect(replay.response.status).toBe(204);
    expect(replay.response.body.length).toBe(0);
  });

  it('keeps scopes independent: one key in two scopes is two records', async () => {
    const req = request({ scope: 'alice' });
    const bob = again(req, { scope: 'bob' });
    const a = claimedOf(await suite.store.claim(req));
    const b = claimedOf(await suite.store.claim(bob));
    expect(a.recordId).not.toBe(b.recordId);
    await suite.store.complete(refOf(req), RESPONSE, LONG);
    // Bob never sees Alice's stored response.
    expect((await suite.store.claim(again(bob))).outcome).toBe('in_flight');
    expect((await suite.store.claim(again(req))).outcome).toBe('completed');
  });
}
