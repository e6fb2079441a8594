import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { DatabaseOutage } from '../fixtures/database-outage';
import { countRows, startSampleApp } from '../fixtures/sample-app';
import type { InProcessSampleApp } from '../fixtures/sample-app';
import { waitFor } from '../fixtures/wait-for';

const ACCOUNT = 'acct_outage';

describe.each(['express', 'fastify'] as const)(
  'sample app during a database outage (%s)',
  (adapter) => {
    let db: TestDatabase;
    let sample: InProcessSampleApp;
    let outage: DatabaseOutage;

    beforeAll(async () => {
      db = await createTestDatabase();
      outage = await DatabaseOutage.of(db);
      // A slow provider keeps the handler busy while the database goes away: the outage has
      // 0.7 s to begin once the first step is seen done (0.3 s was short on a loaded host), and
      // the charge 0.5 s to spare within its timeout (0.6 × the lease, 1.2 s). A 2 s lease lets
      // the retry take the key over soon after.
      sample = await startSampleApp(adapter, db, { lockTimeoutSeconds: 2, providerLatencyMs: 700 });
      // Starting the sample app took over the default 30 s on a loaded 2-core host.
    }, 120_000);

    afterAll(async () => {
      await outage?.end().catch(() => undefined);
      await sample?.close();
      await db?.drop();
    });

    const pay = (key: string, body: object) =>
      request(sample.server)
        .post('/payments')
        .set('X-Account-Id', ACCOUNT)
        .set('Idempotency-Key', key)
        .send(body);

    it('answers 503 with Retry-After, runs nothing unprotected, and charges once after recovery', async () => {
      const body = { amount: 4200, currency: 'eur', customerId: `cus_outage_${adapter}` };
      const newBody = { amount: 100, currency: 'eur', customerId: `cus_outage_new_${adapter}` };
      const inFlight = pay(`mid-${adapter}`, body).then((res) => res);
      // Past its first step, calling the provider: the outage then meets the handler's own
      // work, not the claim or the operation's start (which answer the library's 503). A loaded
      // host took over waitFor's default 5 s to get there.
      await waitFor(
        async () =>
          (
            await db.query(
              `SELECT 1 FROM idempotency_records
                WHERE idempotency_key = $1 AND recovery_point = 'payment_created'`,
              [`mid-${adapter}`],
            )
          ).length === 1,
        20_000,
      );
      await outage.begin();

      // The handler was running when the database went away: its query fails, and the client
      // is told to retry (503, not a bare 500), with nothing stored.
      const interrupted = await inFlight;
      expect(interrupted.status).toBe(503);
      expect(interrupted.headers['retry-after']).toBe('1');
      expect(interrupted.body.error.code).toBe('database_unavailable');

      // A new key cannot be claimed: 503 problem+json, and its handler never runs.
      const refused = await pay(`new-${adapter}`, newBody);
      expect(refused.status).toBe(503);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.body.code).toBe('idempotency_store_unavailable');

      await outage.end();

      // Without a restart, the interrupted key is taken over once its lease lapses (409 until
      // then) and charges exactly once; the refused key runs for the first time.
      let retried!: request.Response;
      await waitFor(async () => {
        retried = await pay(`mid-${adapter}`, body);
        return retried.status !== 409 && retried.status !== 503;
      }, 30_000);
      expect(retried.status).toBe(201);
      const replay = await pay(`mid-${adapter}`, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(retried.text);
      expect(await countRows(db, body.customerId)).toEqual({ payments: 1, charges: 1 });

      expect(await countRows(db, newBody.customerId)).toEqual({ payments: 0, charges: 0 });
      await pay(`new-${adapter}`, newBody).expect(201);
      expect(await countRows(db, newBody.customerId)).toEqual({ payments: 1, charges: 1 });
    }, 90_000);
  },
);
