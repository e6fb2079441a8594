/**
 * Encryption at rest (`encryption: { keys }`) through HTTP on real PostgreSQL, on both adapters:
 * the record's row holds none of the response's plaintext while its replay is byte-identical; keys
 * rotate across a restart (a new first key) and old records still replay; records stored before
 * encryption replay only while `plaintextUntil` lets them, and records sealed before the status was
 * sealed still replay; a row changed outside the library (its seal marker removed, its status or
 * headers changed, an operation's state put in the clear) answers 500
 * `idempotency_record_unreadable` and never runs the handler again; a record whose key was removed
 * answers 500 `idempotency_record_unreadable` on every retry without running the handler; and an
 * operation in phases keeps its input and state sealed in the row and resumes after a retry-later —
 * or, with its key gone, is neither resumed by a retry nor by the completer, which leaves it as it
 * is until the key is back.
 */
import { randomBytes } from 'node:crypto';
import { Controller, HttpCode, Logger, Post, Res } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import type { IdempotencyModuleOptions } from '../../lib';
import { IdempotencyCompleter, IdempotencyOperations } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import { legacySealedBody } from '../fixtures/legacy-seal';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import { OrdersController, Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';

const K1 = { id: '2026-01', secret: randomBytes(32).toString('base64') };
const K2 = { id: '2026-02', secret: randomBytes(32) };
const PLAINTEXT = 'card-ending-4242-plaintext';

/** A route that mints a secret: its body is never kept (`storeBody: false`). */
@Controller('api-keys')
class ApiKeysController {
  constructor(private readonly probe: Probe) {}

  @Post()
  @Idempotent({ responses: { storeBody: false } })
  mint(@Res({ passthrough: true }) res: any) {
    this.probe.count('mint');
    const id = `key_${randomBytes(4).toString('hex')}`;
    if (typeof res.header === 'function') res.header('Location', `/api-keys/${id}`);
    else res.setHeader('Location', `/api-keys/${id}`);
    return { id, secret: `sk_live_${id}` };
  }
}

/** A declined charge: a 402 whose record must stay a 402. */
@Controller('charges')
class ChargesController {
  constructor(private readonly probe: Probe) {}

  @Post()
  @HttpCode(402)
  @Idempotent()
  decline(@Res({ passthrough: true }) res: any) {
    this.probe.count('decline');
    if (typeof res.header === 'function') res.header('Location', '/charges/declined');
    else res.setHeader('Location', '/charges/declined');
    return { declined: true, reason: PLAINTEXT };
  }
}

/** Encryption with these keys, the first sealing; no keys: encryption off. */
function encryption(...keys: Array<{ id: string; secret: string | Buffer }>) {
  return { encryption: keys.length ? { keys } : null } satisfies IdempotencyModuleOptions;
}

/** Encryption with K1 that still reads records stored in the clear until `until`. */
function readingPlaintextUntil(until: Date) {
  return { encryption: { keys: [K1], plaintextUntil: until } } satisfies IdempotencyModuleOptions;
}

describe.each(ADAPTERS)('encryption at rest on %s', (adapter: AdapterName) => {
  let db: TestDatabase;
  const apps: TestApp[] = [];
  let n = 0;
  const newKey = () => `enc-${adapter}-${++n}`;
  let errors: string[];

  /** An app on the test database; replays always read PostgreSQL (no replay cache). */
  async function start(module: IdempotencyModuleOptions): Promise<TestApp> {
    const app = await createTestApp(adapter, db, {
      ...TRANSFERS,
      controllers: [
        ...TRANSFERS.controllers,
        OrdersController,
        ApiKeysController,
        ChargesController,
      ],
      module: { replayCache: false, ...module },
      phases: { completer: { enabled: false, afterSeconds: 0 }, jobs: false },
    });
    apps.push(app);
    return app;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  beforeEach(() => {
    errors = [];
    jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => {
      errors.push(String(message));
    });
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    while (apps.length) await apps.pop()!.close();
  });

  afterAll(async () => {
    await db?.drop();
  });

  const post = (t: TestApp, key: string, path = '/orders') =>
    request(t.server).post(path).set('Idempotency-Key', key).send({ amount: 42, note: PLAINTEXT });

  /** The record's whole row as text, with its response body's raw bytes. */
  async function rowText(key: string): Promise<string> {
    const [row] = await db.query<{ row: string; body: Buffer | null }>(
      `SELECT row_to_json(r)::text AS row, r.response_body AS body FROM idempotency_records r
        WHERE idempotency_key = $1`,
      [key],
    );
    expect(row).toBeDefined();
    return `${row.row}\n${row.body?.toString('latin1') ?? ''}`;
  }

  async function sealedWith(key: string): Promise<string | undefined> {
    const [row] = await db.query(
      'SELECT response_headers FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    return row.response_headers['x-nest-idempotency-sealed'];
  }

  /** 500 problem+json idempotency_record_unreadable, holding none of the record's bytes. */
  function expectUnreadable(res: request.Response): void {
    expect(res.status).toBe(500);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ code: 'idempotency_record_unreadable', status: 500 });
    expect(res.headers['idempotent-replayed']).toBeUndefined();
    expect(res.headers.location).toBeUndefined();
  }

  function expectSameAnswer(replay: request.Response, first: request.Response): void {
    expect(replay.status).toBe(first.status);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.headers.location).toBe(first.headers.location);
    expect(Buffer.from(replay.text).equals(Buffer.from(first.text))).toBe(true);
  }

  it.each([
    ['a plain route', '/orders', 'create'],
    ['a transactional route', '/orders/tx', 'tx'],
  ])('%s: the row holds no plaintext, the replay is byte-identical', async (_, path, name) => {
    const t = await start(encryption(K1));
    const key = newKey();
    const first = await post(t, key, path).expect(201);
    expect(first.text).toContain('"amount":42');
    const row = await rowText(key);
    expect(row).toContain(key);
    expect(row).not.toContain('"amount":42');
    expect(row).not.toContain(PLAINTEXT);
    expect(row).not.toContain('application/json');
    if (first.headers.location) expect(row).not.toContain(first.headers.location);
    expect(await sealedWith(key)).toBe(K1.id);
    expectSameAnswer(await post(t, key, path), first);
    expect(t.probe.ran(name)).toBe(1);
  });

  it('a body not kept (storeBody: false): its Location is sealed, a retry still gets 409 with it', async () => {
    const t = await start(encryption(K1));
    const key = newKey();
    const first = await request(t.server).post('/api-keys').set('Idempotency-Key', key).send({});
    expect(first.status).toBe(201);
    const row = await rowText(key);
    expect(row).not.toContain(first.headers.location);
    expect(row).not.toContain('body-omitted');
    const retry = await request(t.server).post('/api-keys').set('Idempotency-Key', key).send({});
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({
      code: 'idempotency_response_not_stored',
      completedStatus: 201,
    });
    expect(retry.headers.location).toBe(first.headers.location);
    expect(retry.text).not.toContain('sk_live_');
    expect(t.probe.ran('mint')).toBe(1);
  });

  it('rotates keys across a restart: old records replay, new ones are sealed with the new key', async () => {
    const before = await start(encryption(K1));
    const key = newKey();
    const first = await post(before, key).expect(201);
    await apps.pop()!.close();

    const rotated = await start(encryption(K2, K1));
    expectSameAnswer(await post(rotated, key), first);
    const fresh = newKey();
    await post(rotated, fresh).expect(201);
    expect(await sealedWith(fresh)).toBe(K2.id);
    expect(await sealedWith(key)).toBe(K1.id);
    expect(before.probe.ran('create') + rotated.probe.ran('create')).toBe(2);
  });

  it('replays records stored before encryption only while plaintextUntil lets it, refuses them after', async () => {
    const plain = await start(encryption());
    const key = newKey();
    const first = await post(plain, key).expect(201);
    expect(await rowText(key)).toContain(PLAINTEXT);
    await apps.pop()!.close();

    const reading = await start(readingPlaintextUntil(new Date(Date.now() + 3_600_000)));
    expectSameAnswer(await post(reading, key), first);
    expect(reading.probe.ran('create')).toBe(0);
    await apps.pop()!.close();

    // The window passed, or never opened: nothing in the row can vouch for a clear record.
    for (const module of [readingPlaintextUntil(new Date(Date.now() - 1_000)), encryption(K1)]) {
      const strict = await start(module);
      expectUnreadable(await post(strict, key));
      expect(strict.probe.ran('create')).toBe(0);
      await apps.pop()!.close();
    }
    expect(errors.join('\n')).toContain('is stored in the clear, but encryption is on');
  });

  it('replays a record sealed by a version before the record was bound (format 1) only while plaintextUntil lets it', async () => {
    const t = await start(readingPlaintextUntil(new Date(Date.now() + 3_600_000)));
    const key = newKey();
    const first = await post(t, key).expect(201);
    const [{ scope }] = await db.query(
      'SELECT scope FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    const headers: Record<string, string> = { 'content-type': first.headers['content-type'] };
    if (first.headers.location) headers.location = first.headers.location;
    const body = legacySealedBody(K1, scope, key, { headers, body: Buffer.from(first.text) });
    await db.query('UPDATE idempotency_records SET response_body = $2 WHERE idempotency_key = $1', [
      key,
      body,
    ]);
    expectSameAnswer(await post(t, key), first);
    expect(t.probe.ran('create')).toBe(1);
    await apps.pop()!.close();
    // Without the window, the format is the row's word: it cannot vouch for the record.
    const strict = await start(encryption(K1));
    expectUnreadable(await post(strict, key));
    expect(errors.join('\n')).toContain('is sealed in a format of a build before');
  });

  describe('a row changed outside the library', () => {
    const sql = (statement: string, key: string) =>
      db.query(`UPDATE idempotency_records SET ${statement} WHERE idempotency_key = $1`, [key]);
    const stripSeal = `response_headers = response_headers - 'x-nest-idempotency-sealed'`;

    it('without its seal marker is refused, never replayed as a body of ciphertext', async () => {
      const t = await start(encryption(K1));
      const key = newKey();
      await post(t, key).expect(201);
      await sql(stripSeal, key);
      for (let retry = 0; retry < 2; retry++) expectUnreadable(await post(t, key));
      expect(t.probe.ran('create')).toBe(1);
    });

    it('a body not kept: without its seal marker it stays refused, never a 201', async () => {
      const t = await start(encryption(K1));
      const key = newKey();
      const mint = () => request(t.server).post('/api-keys').set('Idempotency-Key', key).send({});
      expect((await mint()).status).toBe(201);
      expect((await mint()).status).toBe(409);
      await sql(stripSeal, key);
      expectUnreadable(await mint());
      expect(t.probe.ran('mint')).toBe(1);
    });

    it('a stored 402 made a 201 is refused: the status is under the seal', async () => {
      const t = await start(encryption(K1));
      const key = newKey();
      const charge = () =>
        request(t.server).post('/charges').set('Idempotency-Key', key).send({ amount: 42 });
      const first = await charge();
      expect(first.status).toBe(402);
      expectSameAnswer(await charge(), first);
      await sql('response_status = 201', key);
      expectUnreadable(await charge());
      expect(errors.join('\n')).toContain('has the status 201 in its row but 402 under its seal');
      // Put back, it replays again: the seal was never the problem.
      await sql('response_status = 402', key);
      expectSameAnswer(await charge(), first);
      expect(t.probe.ran('decline')).toBe(1);
    });

    it.each([
      ['its response', 'response_status, response_headers, response_body'],
      ['its response and record id', 'response_status, response_headers, response_body, record_id'],
    ])(
      'a renewed record given %s from an earlier, expired record of the same key is refused',
      async (_, copied) => {
        const t = await start(encryption(K1));
        const key = newKey();
        const order = (amount: number) =>
          request(t.server).post('/orders').set('Idempotency-Key', key).send({ amount });
        await order(1).expect(201);
        const recordIdOf = async () =>
          (
            await db.query('SELECT record_id FROM idempotency_records WHERE idempotency_key = $1', [
              key,
            ])
          )[0].record_id;
        const earlierId = await recordIdOf();
        const [old] = await db.query(
          `SELECT ${copied} FROM idempotency_records WHERE idempotency_key = $1`,
          [key],
        );
        // The earlier record expires; the key is used again for another request.
        await sql(`expires_at = now() - interval '1 second'`, key);
        const renewed = await order(2).expect(201);
        expect(renewed.body.amount).toBe(2);
        expect(await recordIdOf()).not.toBe(earlierId);
        const columns = Object.keys(old);
        await db.query(
          `UPDATE idempotency_records SET ${columns.map((c, i) => `${c} = $${i + 2}`).join(', ')}
            WHERE idempotency_key = $1`,
          [key, ...columns.map((c) => old[c])],
        );
        for (let retry = 0; retry < 2; retry++) {
          const res = await order(2);
          expectUnreadable(res);
          expect(res.body.amount).toBeUndefined();
        }
        expect(t.probe.ran('create')).toBe(2);
      },
    );

    it('a header added beside the seal is refused, not replayed nor ignored', async () => {
      const t = await start(encryption(K1));
      const key = newKey();
      await post(t, key).expect(201);
      await sql(`response_headers = response_headers || '{"location": "/elsewhere"}'`, key);
      expectUnreadable(await post(t, key));
      await sql(`response_headers = '{"x-nest-idempotency-sealed": "${K2.id}"}'`, key);
      expectUnreadable(await post(t, key));
      expect(t.probe.ran('create')).toBe(1);
    });
  });

  it('a record whose key was removed answers 500 idempotency_record_unreadable on every retry', async () => {
    const sealing = await start(encryption(K1));
    const key = newKey();
    await post(sealing, key).expect(201);
    await apps.pop()!.close();

    const [{ record_id: recordId }] = await db.query(
      'SELECT record_id FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    for (const keys of [[K2], []]) {
      const without = await start(encryption(...keys));
      for (let retry = 0; retry < 2; retry++) {
        const res = await post(without, key);
        expect(res.status).toBe(500);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body).toMatchObject({ code: 'idempotency_record_unreadable', status: 500 });
        expect(res.text).not.toContain(K1.id);
      }
      expect(without.probe.ran('create')).toBe(0);
      await apps.pop()!.close();
    }
    expect(sealing.probe.ran('create')).toBe(1);
    // The log names the key id and the record, never a secret or the Idempotency-Key.
    const logged = errors.filter((line) => line.includes('idempotency_record_unreadable'));
    expect(logged.length).toBeGreaterThanOrEqual(4);
    expect(logged[0]).toContain(`The record ${recordId} is sealed with encryption key "${K1.id}"`);
    for (const line of logged) {
      expect(line).not.toContain(key);
      expect(line).not.toContain(K1.secret);
    }

    // With the key back (second), it replays again: nothing was lost.
    const back = await start(encryption(K2, K1));
    const replay = await post(back, key);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  describe('an operation in phases', () => {
    const transfer = (t: TestApp, key: string) =>
      request(t.server)
        .post('/transfers')
        .set('Idempotency-Key', key)
        .send({ amount: 310, to: PLAINTEXT });

    const record = async (key: string) =>
      (
        await db.query(
          `SELECT status, recovery_point, operation_input, operation_state
             FROM idempotency_records WHERE idempotency_key = $1`,
          [key],
        )
      )[0];

    it('keeps input and state sealed in the row and resumes after a retry-later', async () => {
      const t = await start(encryption(K1));
      const hooks = t.app.get(TransferHooks);
      const key = newKey();
      hooks.providerAnswers.push('unavailable');
      const first = await transfer(t, key);
      expect(first.status).toBe(503);
      expect(first.body.code).toBe('idempotency_retry_later');
      const stopped = await record(key);
      expect(stopped).toMatchObject({ status: 'released', recovery_point: 'reserved' });
      for (const sealed of [stopped.operation_input, stopped.operation_state]) {
        expect(Object.keys(sealed).sort()).toEqual(['sealed', 'x-nest-idempotency-sealed']);
        expect(sealed['x-nest-idempotency-sealed']).toBe(K1.id);
      }
      expect(await rowText(key)).not.toContain(PLAINTEXT);

      const retry = await transfer(t, key);
      expect(retry.status).toBe(201);
      expect(hooks.ran(key, 'reserved')).toBe(1);
      expect(hooks.ran(key, 'sent')).toBe(2);
      expect(await rowText(key)).not.toContain(PLAINTEXT);
      expect(await rowText(key)).not.toContain('/transfers/');
      expectSameAnswer(await transfer(t, key), retry);
      expect(hooks.ran(key, 'settled')).toBe(1);
    });

    it('a changed row is refused: its state in the clear past its start, its final status', async () => {
      const t = await start(encryption(K1));
      const hooks = t.app.get(TransferHooks);
      const key = newKey();
      const update = (set: string, ...values: unknown[]) =>
        db.query(`UPDATE idempotency_records SET ${set} WHERE idempotency_key = $1`, [
          key,
          ...values,
        ]);
      hooks.providerAnswers.push('unavailable');
      expect((await transfer(t, key)).status).toBe(503);
      const { operation_state: sealed } = await record(key);
      await update(`operation_state = '{}'`);
      expectUnreadable(await transfer(t, key));
      expect(hooks.ran(key, 'sent')).toBe(1);
      await update('operation_state = $2', sealed);
      const done = await transfer(t, key);
      expect(done.status).toBe(201);
      await update('response_status = 200');
      expectUnreadable(await transfer(t, key));
      expect(hooks.ran(key, 'settled')).toBe(1);
    });

    it('a recovery point moved past a step is refused: the state is sealed for its point', async () => {
      const t = await start(encryption(K1));
      const hooks = t.app.get(TransferHooks);
      const key = newKey();
      hooks.providerAnswers.push('unavailable');
      expect((await transfer(t, key)).status).toBe(503);
      expect(await record(key)).toMatchObject({ recovery_point: 'reserved' });
      await db.query(
        `UPDATE idempotency_records SET recovery_point = 'sent' WHERE idempotency_key = $1`,
        [key],
      );
      for (let retry = 0; retry < 2; retry++) expectUnreadable(await transfer(t, key));
      expect(hooks.ran(key, 'sent')).toBe(1);
      expect(hooks.ran(key, 'settled')).toBe(0);
      // Put back, the operation carries on from where it stood.
      await db.query(
        `UPDATE idempotency_records SET recovery_point = 'reserved' WHERE idempotency_key = $1`,
        [key],
      );
      expect((await transfer(t, key)).status).toBe(201);
      expect(hooks.ran(key, 'reserved')).toBe(1);
    });

    const keyed = (set: string, key: string, ...values: unknown[]) =>
      db.query(`UPDATE idempotency_records SET ${set} WHERE idempotency_key = $1`, [
        key,
        ...values,
      ]);

    it.each([
      [
        'finished by the completer',
        async (t: TestApp) =>
          expect(await t.app.get(IdempotencyCompleter).completeStale()).toMatchObject({
            completed: 1,
          }),
      ],
      [
        'given by an operator (resolveAbandoned())',
        async (t: TestApp, key: string) => {
          await keyed(`status = 'abandoned', owner_token = NULL, locked_until = NULL`, key);
          const response = { status: 201, body: { resolved: PLAINTEXT } };
          const operations = t.app.get(IdempotencyOperations);
          const [{ scope }] = await operations.listAbandoned();
          expect(await operations.resolveAbandoned(scope, key, { response })).toBe(true);
        },
      ],
    ])('an answer %s, copied into the renewed record of its key, is refused', async (_, settle) => {
      const t = await start(encryption(K1));
      const key = newKey();
      t.app.get(TransferHooks).providerAnswers.push('unavailable');
      expect((await transfer(t, key)).status).toBe(503);
      await settle(t, key);
      expect((await transfer(t, key)).status).toBe(201);
      const [old] = await db.query(
        `SELECT response_status, response_headers, response_body FROM idempotency_records
            WHERE idempotency_key = $1`,
        [key],
      );
      // The record expires; the key is used again for another transfer, which finishes.
      await keyed(`expires_at = now() - interval '1 second'`, key);
      const another = () =>
        request(t.server).post('/transfers').set('Idempotency-Key', key).send({ amount: 7 });
      expect((await another()).status).toBe(201);
      await keyed(
        'response_status = $2, response_headers = $3, response_body = $4',
        key,
        ...Object.values(old),
      );
      for (let retry = 0; retry < 2; retry++) expectUnreadable(await another());
    });

    it('with its key gone, neither a retry nor the completer resumes it; with the key back, it finishes', async () => {
      const sealing = await start(encryption(K1));
      const key = newKey();
      sealing.app.get(TransferHooks).providerAnswers.push('unavailable');
      expect((await transfer(sealing, key)).status).toBe(503);
      await apps.pop()!.close();

      const without = await start(encryption(K2));
      const hooks = without.app.get(TransferHooks);
      const res = await transfer(without, key);
      expect(res.status).toBe(500);
      expect(res.body.code).toBe('idempotency_record_unreadable');
      const summary = await without.app.get(IdempotencyCompleter).completeStale();
      expect(summary).toEqual({ taken: 1, completed: 0, abandoned: 0 });
      expect(hooks.runs.filter((run) => run.key === key)).toEqual([]);
      expect(await record(key)).toMatchObject({ status: 'released', recovery_point: 'reserved' });
      expect(errors.join('\n')).toContain(`sealed with encryption key "${K1.id}"`);
      await apps.pop()!.close();

      const back = await start(encryption(K2, K1));
      const done = await transfer(back, key);
      expect(done.status).toBe(201);
      expect(done.body).toMatchObject({ amount: 310 });
      expect(back.app.get(TransferHooks).ran(key, 'reserved')).toBe(0);
    });
  });
});
