/**
 * A client that gives up while its handler runs (a timeout, a dropped connection) is the case
 * idempotency exists for: the handler goes on and may charge, so the key must stay claimed until
 * the handler's response is stored, and the client's retry must get that response, never a
 * second execution.
 */
import { request as httpRequest } from 'node:http';
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { orderCount } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

describe.each(ADAPTERS)('a client that disconnects while its handler runs (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let port: number;
  let n = 0;
  const newKey = () => `gone-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db);
    await t.app.listen(0, '127.0.0.1');
    port = t.app.getHttpServer().address().port;
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const status = async (key: string) =>
    (
      await db.query<{ status: string }>(
        'SELECT status FROM idempotency_records WHERE idempotency_key = $1',
        [key],
      )
    )[0]?.status;

  /** Sends the request, waits until its handler runs, then drops the connection. */
  const sendAndHangUp = async (path: string, counter: string, key: string, body: object) => {
    const before = t.probe.ran(counter);
    const payload = JSON.stringify(body);
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path,
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        'idempotency-key': key,
      },
    });
    const closed = new Promise<void>((resolve) => req.on('close', () => resolve()));
    req.on('error', () => undefined);
    req.end(payload);
    await waitFor(async () => t.probe.ran(counter) === before + 1);
    req.destroy();
    await closed;
  };

  it.each([
    ['/orders', 'create'],
    ['/orders/tx', 'tx'],
  ])(
    'on %s keeps the key claimed, stores the late response and replays it',
    async (path, counter) => {
      const key = newKey();
      const body = { amount: 12, note: key, gate: key };
      const started = t.probe.ran(counter);
      await sendAndHangUp(path, counter, key, body);
      // A retry made at once must neither run the handler again nor find the key free. If it did
      // run, its gate would be open: the double execution shows as a 201 and a second order.
      t.probe.open(`${key}#2`);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const early = await request(t.server).post(path).set('Idempotency-Key', key).send(body);
      expect(early.status).toBe(409);
      expect(early.body.code).toBe('idempotency_key_in_use');
      expect(await status(key)).toBe('in_flight');

      // The handler finishes after its client left: its response is stored all the same.
      t.probe.open(`${key}#1`);
      await waitFor(async () => (await status(key)) === 'completed');
      const retry = await request(t.server).post(path).set('Idempotency-Key', key).send(body);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.body).toMatchObject({ amount: 12 });
      expect(t.probe.ran(counter) - started).toBe(1);
      expect(await orderCount(db, key)).toBe(1);
    },
  );
});
