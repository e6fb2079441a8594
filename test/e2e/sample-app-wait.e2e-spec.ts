/**
 * The sample's `POST /payments` honours `Prefer: wait=N` (at most 10 s): while the first request
 * is charging (the fake provider takes 300 ms here), a retry that asks to wait gets the payment
 * once it is done — the same bytes, one charge — and a retry that does not ask gets 409.
 */
import { Client } from 'pg';
import request from 'supertest';
import { wakeUpChannelOf } from '../../lib/storage/typeorm/typeorm-wake-ups';
import { wakeTokenOf } from '../../lib/waiting/wake-token';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { countRows, startSampleApp } from '../fixtures/sample-app';
import type { InProcessSampleApp } from '../fixtures/sample-app';
import { waitFor } from '../fixtures/wait-for';
import { waitersOf } from '../fixtures/waiting.controller';

describe.each(['express', 'fastify'] as const)(
  'sample app: POST /payments with Prefer: wait (%s)',
  (adapter) => {
    let db: TestDatabase;
    let sample: InProcessSampleApp;

    beforeAll(async () => {
      db = await createTestDatabase();
      sample = await startSampleApp(adapter, db, { providerLatencyMs: 300 });
    });

    afterAll(async () => {
      await sample?.close();
      await db?.drop();
    });

    const pay = (key: string, body: object, prefer?: string) => {
      const req = request(sample.server)
        .post('/payments')
        .set('X-Account-Id', 'acct_wait')
        .set('Idempotency-Key', key);
      return (prefer ? req.set('Prefer', prefer) : req).send(body);
    };

    it('a retry that asks to wait gets the payment; one that does not gets 409', async () => {
      const body = { amount: 990, currency: 'eur', customerId: 'cus_wait' };
      const key = `wait-${adapter}`;
      const first = pay(key, body).then((response) => response);
      // The payment exists (pending) once the first request's first step committed.
      const pending = () =>
        db.query<{ n: number }>(`SELECT count(*)::int AS n FROM payments WHERE customer_id = $1`, [
          'cus_wait',
        ]);
      await waitFor(async () => (await pending())[0].n === 1);
      const waiters = Array.from({ length: 3 }, () =>
        pay(key, body, 'wait=3600').then((response) => response),
      );
      await waitFor(async () => waitersOf(sample.app) === 3);
      const impatient = await pay(key, body);
      expect(impatient.status).toBe(409);
      expect(impatient.headers['retry-after']).toBe('1');
      const original = await first;
      expect(original.status).toBe(201);
      for (const response of await Promise.all(waiters)) {
        expect(response.status).toBe(201);
        expect(response.headers['idempotent-replayed']).toBe('true');
        expect(response.headers['preference-applied']).toBe('wait=10');
        expect(response.text).toBe(original.text);
      }
      expect(await countRows(db, 'cus_wait')).toEqual({ payments: 1, charges: 1 });
    });

    it("the operation's last step announces the payment to other instances (NOTIFY at its commit)", async () => {
      const listener = new Client({ connectionString: db.url });
      await listener.connect();
      const heard: string[] = [];
      listener.on('notification', (message) => heard.push(message.payload ?? ''));
      try {
        await listener.query(`LISTEN ${wakeUpChannelOf('idempotency_records')}`);
        const key = `announced-${adapter}`;
        const body = { amount: 991, currency: 'eur', customerId: 'cus_wait_announced' };
        expect((await pay(key, body)).status).toBe(201);
        await waitFor(async () => heard.length === 1);
        expect(heard).toEqual([wakeTokenOf('acct_wait', key)]);
      } finally {
        await listener.end();
      }
    });
  },
);
