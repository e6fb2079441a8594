/**
 * Where operations in phases meet the request and the completer: who may complete a record an
 * operation is bound to, what a step's bad answer or unstorable outcome does, and which
 * settings the completer and an operator answer with. On both adapters, against PostgreSQL;
 * observed as statuses, bodies, rows, step runs and provider calls.
 */
import { BadRequestException } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import request from 'supertest';
import { IdempotencyCompleter, IdempotencyOperations } from '../../lib/phases';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

interface RecordRow {
  status: string;
  recovery_point: string | null;
  owner_token: string | null;
  response_status: number | null;
  response_headers: Record<string, string> | null;
  ttl_seconds: number | null;
}

describe.each(ADAPTERS)('operations at the seams on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  let n = 0;
  const key = () => `seam-${adapter}-${++n}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      ...TRANSFERS,
      // The completer runs when the test asks (completeStale), on records idle for 0 s.
      // Replays come from PostgreSQL, whose rows the tests move (an expiry set back by SQL).
      module: { replayCache: false },
      phases: { jobs: false, completer: { intervalSeconds: 3600, afterSeconds: 0 } },
    });
    hooks = t.app.get(TransferHooks);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  afterEach(() => {
    hooks.before.clear();
    hooks.respondWith = undefined;
    hooks.providerIdSuffix = '';
    hooks.providerAnswers.length = 0;
  });

  const post = (k: string, body: object, path = '/transfers') =>
    request(t.server).post(path).set('Idempotency-Key', k).send(body);

  async function record(k: string): Promise<RecordRow> {
    const [row] = await db.query<RecordRow>(
      `SELECT status, recovery_point, owner_token, response_status, response_headers,
              round(EXTRACT(EPOCH FROM expires_at - updated_at))::int AS ttl_seconds
         FROM idempotency_records WHERE idempotency_key = $1`,
      [k],
    );
    return row;
  }

  it('a step that throws a final 4xx after the charge releases the key at its recovery point; the retry resumes and charges once', async () => {
    const k = key();
    hooks.before.set('settled', () => {
      throw new BadRequestException('the ledger refused the settlement');
    });
    const first = await post(k, { amount: 501, to: 'bob' });
    expect(first.status).toBe(400);
    // Not completed with the 400: the operation is unfinished, released where it stands.
    expect(await record(k)).toMatchObject({
      status: 'released',
      recovery_point: 'sent',
      response_status: null,
    });
    hooks.before.clear();
    const retry = await post(k, { amount: 501, to: 'bob' });
    expect(retry.status).toBe(201);
    expect(hooks.ran(k, 'sent')).toBe(1);
    expect(hooks.ran(k, 'settled')).toBe(2);
    expect(await record(k)).toMatchObject({ status: 'completed', recovery_point: 'finished' });
    const replay = await post(k, { amount: 501, to: 'bob' });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body).toEqual(retry.body);
  });

  it('the completer finishes an operation whose step threw a final 4xx', async () => {
    const k = key();
    hooks.before.set('settled', () => {
      throw new BadRequestException('the ledger refused the settlement');
    });
    expect((await post(k, { amount: 502, to: 'bob' })).status).toBe(400);
    hooks.before.clear();
    const summary = await t.app.get(IdempotencyCompleter).completeStale();
    expect(summary).toMatchObject({ taken: 1, completed: 1 });
    expect(await record(k)).toMatchObject({ status: 'completed', recovery_point: 'finished' });
    const replay = await post(k, { amount: 502, to: 'bob' });
    expect(replay.status).toBe(201);
    expect(hooks.ran(k, 'sent')).toBe(1);
  });

  it('the plain completion refuses a record whose operation is unfinished (SQL)', async () => {
    const k = key();
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let proceed!: () => void;
    const held = new Promise<void>((resolve) => (proceed = resolve));
    hooks.before.set('settled', async () => {
      entered();
      await held;
    });
    const first = post(k, { amount: 503, to: 'bob' }).then((res) => res);
    await inside;
    const { owner_token: ownerToken } = await record(k);
    const before = await db.query(
      `SELECT row_to_json(r)::text AS row FROM idempotency_records r WHERE idempotency_key = $1`,
      [k],
    );
    const store = new TypeOrmIdempotencyStore(
      t.app.get<DataSource>(getDataSourceToken()),
      'idempotency_records',
    );
    const ref = { scope: '', key: k, ownerToken: ownerToken! };
    const response = { status: 400, headers: {}, body: Buffer.from('{}') };
    expect(await store.complete(ref, response, 60)).toBe(false);
    const after = await db.query(
      `SELECT row_to_json(r)::text AS row FROM idempotency_records r WHERE idempotency_key = $1`,
      [k],
    );
    expect(after).toEqual(before);
    proceed();
    expect((await first).status).toBe(201);
  });

  it.each([
    ['a header value Node refuses', { headers: { Location: '/files/résumé-€.pdf' } }],
    ['a status outside 100–599', { status: 700 }],
  ])(
    'a last step that responds with %s stores nothing: 500 with the reason, then a fixed retry finishes it',
    async (_, respondWith) => {
      const k = key();
      hooks.respondWith = respondWith;
      const first = await post(k, { amount: 504, to: 'bob' });
      expect(first.status).toBe(500);
      expect(first.body).toMatchObject({ code: 'idempotency_operation_unavailable' });
      expect(first.body.detail).toContain('nothing was stored');
      expect(await record(k)).toMatchObject({ status: 'released', recovery_point: 'sent' });
      hooks.respondWith = undefined;
      const retry = await post(k, { amount: 504, to: 'bob' });
      expect(retry.status).toBe(201);
      expect(hooks.ran(k, 'sent')).toBe(1);
    },
  );

  it('an input with a NUL character is a 400 on every attempt, and nothing runs', async () => {
    const k = key();
    for (let attempt = 0; attempt < 3; attempt++) {
      const res = await post(k, { amount: 505, to: 'bo\u0000b' });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'idempotency_operation_input_invalid' });
    }
    expect(hooks.ran(k, 'reserved')).toBe(0);
    expect(await db.query('SELECT 1 FROM ledger WHERE amount = 505')).toHaveLength(0);
  });

  it('a foreign step whose outcome cannot be stored is called once and handed to an operator', async () => {
    const k = key();
    hooks.providerIdSuffix = '\u0000';
    const answers = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      answers.push((await post(k, { amount: 506, to: 'bob' })).body.code);
    }
    expect(answers).toEqual(Array(3).fill('idempotency_operation_abandoned'));
    expect(hooks.ran(k, 'sent')).toBe(1);
    expect(await record(k)).toMatchObject({ status: 'abandoned', recovery_point: 'reserved' });
    expect(t.events).toContainEqual(
      expect.objectContaining({ type: 'operation_abandoned', key: k, reason: 'unrecordable' }),
    );
  });

  it("the completer stores with the route's TTL and replay headers, not the module's", async () => {
    const k = key();
    hooks.providerAnswers.push('unavailable');
    const first = await post(k, { amount: 507, to: 'bob' }, '/transfers/short-lived');
    expect(first.status).toBe(503);
    expect(await t.app.get(IdempotencyCompleter).completeStale()).toMatchObject({ completed: 1 });
    const row = await record(k);
    expect(row).toMatchObject({ status: 'completed', response_status: 201 });
    // The route's 120 s, neither the module's 86,400 s nor the lease's 60 s.
    expect(row.ttl_seconds).toBe(120);
    expect(row.response_headers).toMatchObject({ 'x-not-replayed': 'yes' });
  });

  it("a key claimed again after its record expired binds the new route's settings, not the old one's", async () => {
    const k = key();
    // A finished operation's record, replayed for the short-lived route's TTL, then expired.
    expect((await post(k, { amount: 509, to: 'bob' }, '/transfers/short-lived')).status).toBe(201);
    await db.query(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 second',
              purge_after = now() - interval '1 second' WHERE idempotency_key = $1`,
      [k],
    );
    hooks.providerAnswers.push('unavailable');
    expect((await post(k, { amount: 510, to: 'bob' })).status).toBe(503);
    const [row] = await db.query<{ ttl: number }>(
      `SELECT (operation_settings->>'ttlSeconds')::int AS ttl FROM idempotency_records
        WHERE idempotency_key = $1`,
      [k],
    );
    expect(row.ttl).toBe(86_400);
  });

  it("an operator's resolution is stored with the route's allow-list and TTL", async () => {
    const k = key();
    hooks.providerIdSuffix = '\u0000';
    await post(k, { amount: 508, to: 'bob' }, '/transfers/short-lived');
    expect((await record(k)).status).toBe('abandoned');
    const resolved = await t.app.get(IdempotencyOperations).resolveAbandoned('', k, {
      response: {
        status: 201,
        body: { resolved: true },
        headers: { Location: '/transfers/x', 'X-Operator-Secret': 'do-not-replay' },
      },
    });
    expect(resolved).toBe(true);
    const row = await record(k);
    expect(row.ttl_seconds).toBe(120);
    expect(row.response_headers).toEqual({
      'content-type': 'application/json; charset=utf-8',
      location: '/transfers/x',
    });
    const replay = await post(k, { amount: 508, to: 'bob' }, '/transfers/short-lived');
    expect(replay.status).toBe(201);
    expect(replay.headers['x-operator-secret']).toBeUndefined();
  });
});
