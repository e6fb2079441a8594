/**
 * A stale owner (docs/design/contract.md#what-is-stored): a request whose lease lapsed while it stalled, and whose key another
 * instance took over, must not renew, complete or release the new owner's record — whatever its
 * handler then does. Two applications share one database, as two instances of a service would:
 * the stale owner runs on A (0.3 s lease, renewed every 0.1 s), the new owner on B (30 s lease,
 * so B itself never renews during a test and any change to `locked_until` would be A's).
 *
 * A's lease lapses deterministically: its heartbeat's renewal is held back (as a stalled event
 * loop or a slow connection would) until B owns the key, then let through to PostgreSQL. Handlers
 * wait on per-attempt gates the test opens or fails. Rows are read from the database.
 */
import request from 'supertest';
import { IdempotencyStore } from '../../lib';
import type { IdempotencyEvent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { leaseLapsed, orderCount } from '../fixtures/record-queries';
import { waitFor } from '../fixtures/wait-for';

interface RecordRow {
  status: string;
  owner_token: string;
  locked_until: string | null;
  attempts: number;
  response_status: number | null;
  response_body: Buffer | null;
}

/**
 * Holds back every lease renewal of one store until `letThrough()`, then sends it to the real
 * store: a heartbeat that stalls past its lease. Records what each held renewal returned.
 */
function stallRenewals(store: IdempotencyStore) {
  const original = store.renew.bind(store);
  let letThrough!: () => void;
  const gate = new Promise<void>((resolve) => (letThrough = resolve));
  const results: Promise<boolean>[] = [];
  const spy = jest.spyOn(store, 'renew').mockImplementation((ref, seconds) => {
    const result = gate.then(() => original(ref, seconds));
    results.push(result);
    return result;
  });
  return { results, letThrough, restore: () => spy.mockRestore() };
}

describe.each(ADAPTERS)('a stale owner on %s', (adapter) => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let seq = 0;
  const newKey = () => `stale-${adapter}-${++seq}-${Date.now()}`;
  const row = async (key: string): Promise<RecordRow> =>
    (
      await db.query(
        `SELECT status, owner_token, locked_until::text AS locked_until, attempts,
                response_status, response_body
           FROM idempotency_records WHERE idempotency_key = $1`,
        [key],
      )
    )[0];
  const eventsFor = (t: TestApp, key: string) =>
    t.events.filter((e): e is IdempotencyEvent & { key: string } => 'key' in e && e.key === key);

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await createTestApp(adapter, db, {
      module: { execution: { lockTimeoutSeconds: 0.3, maxLockHoldSeconds: 30 } },
    });
    b = await createTestApp(adapter, db, { module: { execution: { lockTimeoutSeconds: 30 } } });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it.each([
    ['/orders', 'fails'],
    ['/orders', 'succeeds'],
    ['/orders/tx', 'fails'],
    ['/orders/tx', 'succeeds'],
  ] as const)(
    'on %s that %s after the takeover renews, completes and releases nothing',
    async (path, outcome) => {
      const key = newKey();
      const note = `stale-owner-${key}`;
      const body = { amount: 6, note, gate: key };
      const send = (t: TestApp) =>
        request(t.server)
          .post(path)
          .set('Idempotency-Key', key)
          .send(body)
          .then((r) => r);
      const stalled = stallRenewals(a.app.get(IdempotencyStore));
      try {
        // A claims the key; its first renewal stalls and its 0.3 s lease lapses.
        const stale = send(a);
        await waitFor(async () => (await row(key))?.status === 'in_flight');
        const claimedByA = await row(key);
        await waitFor(async () => stalled.results.length > 0);
        await waitFor(() => leaseLapsed(db, key));

        // B takes the key over and holds it (30 s lease, gate of attempt 2 closed).
        const takeover = send(b);
        await waitFor(async () => (await row(key))?.attempts === 2);
        const ownedByB = await row(key);
        expect(ownedByB.status).toBe('in_flight');
        expect(ownedByB.owner_token).not.toBe(claimedByA.owner_token);

        // A's stalled renewal reaches PostgreSQL now: refused, B's lease untouched.
        stalled.letThrough();
        expect(await Promise.all(stalled.results)).toEqual(stalled.results.map(() => false));
        await waitFor(async () =>
          eventsFor(a, key).some((e) => e.type === 'lock_lost' && e.during === 'renew'),
        );
        expect(await row(key)).toEqual(ownedByB);

        // A's handler finishes: fails (500) or succeeds; neither touches B's record.
        if (outcome === 'fails') a.probe.fail(`${key}#1`);
        else a.probe.open(`${key}#1`);
        const late = await stale;
        if (outcome === 'fails') {
          expect(late.status).toBe(500);
        } else if (path === '/orders') {
          expect(late.status).toBe(201); // its client still gets its own response
        } else {
          expect(late.status).toBe(409); // its transaction was rolled back
          expect(late.body.code).toBe('idempotency_key_in_use');
        }
        expect(await row(key)).toEqual(ownedByB);
        expect(eventsFor(a, key)).toContainEqual(
          expect.objectContaining({
            type: 'lock_lost',
            during: outcome === 'fails' ? 'release' : 'complete',
          }),
        );
        expect(eventsFor(a, key).filter((e) => e.type === 'released')).toEqual([]);

        // B's lease is still live everywhere: a retry on either instance gets 409.
        expect((await send(a)).status).toBe(409);
        expect((await send(b)).status).toBe(409);

        // B finishes; its response is the one stored and replayed, on both instances.
        b.probe.open(`${key}#2`);
        const winner = await takeover;
        expect(winner.status).toBe(201);
        const done = await row(key);
        expect(done.status).toBe('completed');
        expect(done.response_body?.toString('utf8')).toBe(winner.text);
        for (const t of [a, b]) {
          const replay = await send(t);
          expect(replay.status).toBe(201);
          expect(replay.headers['idempotent-replayed']).toBe('true');
          expect(replay.text).toBe(winner.text);
        }
        const stored = path === '/orders' && outcome === 'succeeds' ? 2 : 1;
        expect(await orderCount(db, note)).toBe(stored);
      } finally {
        // On a failed assertion, let everything still waiting finish rather than hang.
        stalled.letThrough();
        stalled.restore();
        a.probe.open(`${key}#1`);
        b.probe.open(`${key}#2`);
      }
    },
  );
});
