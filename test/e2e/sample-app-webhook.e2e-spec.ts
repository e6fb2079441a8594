/**
 * The sample app's provider webhook, `POST /webhooks/provider`, on Express and Fastify: a
 * `charge.refunded` event signed in `Provider-Signature` (Stripe's scheme) with
 * `WEBHOOK_SECRET` records one refund of the payment, listed by the refunds route, however many
 * times it is delivered, one after the other or all at once; every delivery ends in a 200; a
 * bad signature is 400 problem+json and records nothing. The app starts with `rawBody: true`.
 */
import { createHmac } from 'node:crypto';
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { startSampleApp } from '../fixtures/sample-app';
import type { InProcessSampleApp } from '../fixtures/sample-app';

const ACCOUNT = 'acct_webhooks';
const SECRET = 'whsec_sample';

describe.each(['express', 'fastify'] as const)('the sample’s provider webhook (%s)', (adapter) => {
  let db: TestDatabase;
  let sample: InProcessSampleApp;
  let n = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    sample = await startSampleApp(adapter, db, { jobsIntervalSeconds: 3600 });
  });

  afterAll(async () => {
    await sample?.close();
    await db?.drop();
  });

  /** Sends one delivery of an event, signed now with a secret, as the provider would. */
  const deliver = (event: object, secret = SECRET, body = JSON.stringify(event)) => {
    const t = Math.floor(Date.now() / 1000);
    const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
    return request(sample.server)
      .post('/webhooks/provider')
      .set('Content-Type', 'application/json')
      .set('Provider-Signature', `t=${t},v1=${v1}`)
      .send(body);
  };

  /** A payment of 1000 to refund. */
  async function payment(): Promise<string> {
    const created = await request(sample.server)
      .post('/payments')
      .set('X-Account-Id', ACCOUNT)
      .set('Idempotency-Key', `webhook-payment-${adapter}-${++n}`)
      .send({ amount: 1000, currency: 'eur', customerId: 'cus_webhooks' })
      .expect(201);
    return created.body.id;
  }

  const refundsOf = async (paymentId: string) =>
    (
      await request(sample.server)
        .get(`/payments/${paymentId}/refunds`)
        .set('X-Account-Id', ACCOUNT)
        .expect(200)
    ).body;

  const refundEvent = (paymentId: string, amount = 100) => ({
    id: `evt_${adapter}_${++n}`,
    type: 'charge.refunded',
    data: { paymentId, amount },
  });

  it('records one refund, however many times the event is delivered in a row', async () => {
    const paymentId = await payment();
    const event = refundEvent(paymentId);
    const first = await deliver(event);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      received: event.id,
      refund: {
        id: expect.stringMatching(/^re_/),
        paymentId,
        amount: 100,
        createdAt: expect.any(String),
      },
    });
    for (let i = 0; i < 3; i++) {
      const again = await deliver(event);
      expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
      expect(again.body).toEqual(first.body);
    }
    expect(await refundsOf(paymentId)).toEqual([first.body.refund]);
  });

  it('records one refund when the deliveries come all at once; each ends in a 200', async () => {
    const paymentId = await payment();
    const event = refundEvent(paymentId, 250);
    const answers = await Promise.all(Array.from({ length: 6 }, () => deliver(event)));
    for (const answer of answers) {
      expect([200, 409]).toContain(answer.status);
      // A 409 is what the provider retries.
      if (answer.status === 409) expect((await deliver(event)).status).toBe(200);
    }
    const refunds = await refundsOf(paymentId);
    expect(refunds).toHaveLength(1);
    expect(refunds[0]).toMatchObject({ paymentId, amount: 250 });
  });

  it('a bad signature is 400 problem+json, and records nothing', async () => {
    const paymentId = await payment();
    const event = refundEvent(paymentId);
    const forged = await deliver(event, 'whsec_someone_else');
    expect(forged.status).toBe(400);
    expect(forged.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(forged.body).toMatchObject({ code: 'idempotency_webhook_signature_invalid' });
    const unsigned = await request(sample.server)
      .post('/webhooks/provider')
      .set('Content-Type', 'application/json')
      .send(event);
    expect([unsigned.status, unsigned.body.code]).toEqual([
      400,
      'idempotency_webhook_signature_invalid',
    ]);
    expect(await refundsOf(paymentId)).toEqual([]);
    // Signed properly, the same event is processed.
    expect((await deliver(event)).body.refund).toMatchObject({ paymentId, amount: 100 });
  });

  it('acknowledges events it does not act on', async () => {
    const answer = await deliver({ id: `evt_other_${adapter}`, type: 'charge.succeeded' });
    expect([answer.status, answer.body]).toEqual([
      200,
      { received: `evt_other_${adapter}`, ignored: 'event_type' },
    ]);
    const unknown = await deliver(refundEvent('pay_unknown'));
    expect([unknown.status, unknown.body.ignored]).toEqual([200, 'unknown_payment']);
  });
});
