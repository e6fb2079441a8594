import request from 'supertest';
import { IdempotencyJobs } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { countRows, startSampleApp } from '../fixtures/sample-app';
import type { InProcessSampleApp } from '../fixtures/sample-app';

const ACCOUNT = 'acct_alice';
const OTHER_ACCOUNT = 'acct_bob';

describe.each(['express', 'fastify'] as const)('sample payments app (%s)', (adapter) => {
  let db: TestDatabase;
  let sample: InProcessSampleApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    // The drainer runs when a test asks (IdempotencyJobs.drain()).
    sample = await startSampleApp(adapter, db, { jobsIntervalSeconds: 3600 });
  });

  afterAll(async () => {
    await sample?.close();
    await db?.drop();
  });

  const pay = (key: string | undefined, body: object, account: string | null = ACCOUNT) => {
    let req = request(sample.server).post('/payments');
    if (account !== null) req = req.set('X-Account-Id', account);
    if (key !== undefined) req = req.set('Idempotency-Key', key);
    return req.send(body);
  };
  const refund = (paymentId: string, key: string, body: object, account = ACCOUNT) =>
    request(sample.server)
      .post(`/payments/${paymentId}/refunds`)
      .set('X-Account-Id', account)
      .set('Idempotency-Key', key)
      .send(body);
  const chargesOf = async (customerId: string) =>
    (await request(sample.server).get('/provider/charges').query({ customerId }).expect(200)).body;

  it('GET /health answers 200', async () => {
    const { body } = await request(sample.server).get('/health').expect(200);
    expect(body.status).toBe('ok');
    expect(body.info.idempotency).toMatchObject({ status: 'up', stuckInFlight: 0 });
  });

  it('creates a schema through migrations (not synchronize)', async () => {
    const rows = await db.query<{ name: string }>('SELECT name FROM migrations ORDER BY id');
    expect(rows.map((r) => r.name)).toEqual([
      'CreateIdempotencyRecords1732233600000',
      'CreatePayments1763769600000',
      'CreateProviderTables1763769600001',
      'AddPaymentPhases1764028800000',
    ]);
  });

  it('charges once for the same key and replays the first answer byte for byte', async () => {
    const body = {
      amount: 1250,
      currency: 'eur',
      customerId: 'cus_replay',
      description: 'Order #1',
    };
    const first = await pay('replay-1', body);
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body).toEqual({
      id: expect.stringMatching(/^pay_/),
      amount: 1250,
      currency: 'eur',
      customerId: 'cus_replay',
      description: 'Order #1',
      status: 'succeeded',
      chargeId: expect.stringMatching(/^ch_/),
      createdAt: expect.any(String),
    });
    expect(first.headers.location).toBe(`/payments/${first.body.id}`);
    expect(new Date(first.body.createdAt).toISOString()).toBe(first.body.createdAt);

    const second = await pay('replay-1', body);
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.text).toBe(first.text);
    expect(second.headers.location).toBe(first.headers.location);
    expect(second.headers['content-type']).toBe(first.headers['content-type']);

    // Reordered keys are the same request (canonical JSON fingerprint).
    const reordered = await pay('replay-1', {
      description: 'Order #1',
      customerId: 'cus_replay',
      currency: 'eur',
      amount: 1250,
    });
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    expect(reordered.text).toBe(first.text);

    expect(await countRows(db, 'cus_replay')).toEqual({ payments: 1, charges: 1 });
    const charges = await chargesOf('cus_replay');
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ id: first.body.chargeId, amount: 1250, currency: 'eur' });
  });

  it('answers 422 when the key is reused with a different body, and charges nothing more', async () => {
    const body = { amount: 500, currency: 'usd', customerId: 'cus_reuse' };
    await pay('reuse-1', body).expect(201);
    const changed = await pay('reuse-1', { ...body, amount: 501 });
    expect(changed.status).toBe(422);
    expect(changed.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(changed.body).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    expect(await countRows(db, 'cus_reuse')).toEqual({ payments: 1, charges: 1 });
  });

  it('stores a decline (402) and replays it; nothing is charged, the payment is recorded failed', async () => {
    const body = { amount: 700, currency: 'eur', customerId: 'cus_declined' };
    const first = await pay('decline-1', body);
    expect(first.status).toBe(402);
    expect(first.body).toEqual({
      error: { type: 'card_error', code: 'card_declined', message: expect.any(String) },
    });
    const second = await pay('decline-1', body);
    expect(second.status).toBe(402);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(second.text).toBe(first.text);
    expect(await countRows(db, 'cus_declined')).toEqual({ payments: 0, charges: 0 });
    expect(
      await db.query(
        `SELECT p.status, array_agg(a.event ORDER BY a.id) AS events
           FROM payments p JOIN payment_audit a ON a.payment_id = p.id
          WHERE p.customer_id = 'cus_declined' GROUP BY p.id`,
      ),
    ).toEqual([{ status: 'failed', events: ['created', 'declined'] }]);
  });

  it('does not store a 503 from the provider: the retry charges once and answers 201', async () => {
    const body = { amount: 900, currency: 'gbp', customerId: 'cus_unavailable_once' };
    const first = await pay('unavailable-1', body);
    // The charge step asked to be retried later: the key is released where it stands.
    expect(first.status).toBe(503);
    expect(first.headers['retry-after']).toBe('1');
    expect(first.body).toMatchObject({ code: 'idempotency_retry_later' });
    expect(await countRows(db, 'cus_unavailable_once')).toEqual({ payments: 0, charges: 0 });

    const retry = await pay('unavailable-1', body);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(await countRows(db, 'cus_unavailable_once')).toEqual({ payments: 1, charges: 1 });

    const replay = await pay('unavailable-1', body);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(retry.text);
  });

  it('does not store a 504 after the provider charged: the retry finds that charge (exactly one)', async () => {
    const body = { amount: 1100, currency: 'eur', customerId: 'cus_timeout_once' };
    const first = await pay('timeout-1', body);
    expect(first.status).toBe(504);
    expect(first.body.error).toMatchObject({ code: 'provider_timeout' });
    // The provider charged; the payment stays pending (its first step committed) until a retry.
    expect(await countRows(db, 'cus_timeout_once')).toEqual({ payments: 0, charges: 1 });
    expect(
      await db.query("SELECT status FROM payments WHERE customer_id = 'cus_timeout_once'"),
    ).toEqual([{ status: 'pending' }]);

    const retry = await pay('timeout-1', body);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    const charges = await chargesOf('cus_timeout_once');
    expect(charges).toHaveLength(1);
    expect(retry.body.chargeId).toBe(charges[0].id);
    expect(await countRows(db, 'cus_timeout_once')).toEqual({ payments: 1, charges: 1 });
  });

  it('writes the receipt through the staged job: 404 until the drainer delivered it, then 200', async () => {
    const body = { amount: 1300, currency: 'eur', customerId: 'cus_receipt' };
    const paid = await pay('receipt-1', body).expect(201);
    const receipt = () =>
      request(sample.server).get(`/payments/${paid.body.id}/receipt`).set('X-Account-Id', ACCOUNT);
    const before = await receipt();
    expect(before.status).toBe(404);
    expect(before.body.error).toMatchObject({ code: 'resource_missing' });
    expect((await sample.app.get(IdempotencyJobs).drain()).delivered).toBeGreaterThanOrEqual(1);
    const after = await receipt().expect(200);
    expect(after.body).toMatchObject({ paymentId: paid.body.id, amount: 1300, currency: 'eur' });
    // Another account cannot read it.
    await request(sample.server)
      .get(`/payments/${paid.body.id}/receipt`)
      .set('X-Account-Id', OTHER_ACCOUNT)
      .expect(404);
  });

  it('requires X-Account-Id on every /payments route (401), before the key is claimed', async () => {
    const body = { amount: 100, currency: 'eur', customerId: 'cus_anonymous' };
    const anonymous = await pay('anon-1', body, null);
    expect(anonymous.status).toBe(401);
    await pay('anon-1', body, '').expect(401);
    await request(sample.server).get('/payments').expect(401);
    await request(sample.server).get('/payments/pay_x').expect(401);
    await request(sample.server)
      .post('/payments/pay_x/refunds')
      .set('Idempotency-Key', 'anon-2')
      .send({ amount: 1 })
      .expect(401);
    const records = await db.query('SELECT 1 FROM idempotency_records WHERE idempotency_key = $1', [
      'anon-1',
    ]);
    expect(records).toHaveLength(0);
    // The key was never claimed: an authenticated request with it runs.
    await pay('anon-1', body).expect(201);
    expect(await countRows(db, 'cus_anonymous')).toEqual({ payments: 1, charges: 1 });
  });

  it('requires an Idempotency-Key on POST /payments (400 problem+json)', async () => {
    const res = await pay(undefined, { amount: 100, currency: 'eur', customerId: 'cus_nokey' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'idempotency_key_missing' });
    expect(await countRows(db, 'cus_nokey')).toEqual({ payments: 0, charges: 0 });
  });

  it.each([
    ['a negative amount', { amount: -5, currency: 'eur', customerId: 'cus_bad' }],
    ['a fractional amount', { amount: 10.5, currency: 'eur', customerId: 'cus_bad' }],
    ['an amount given as a string', { amount: '100', currency: 'eur', customerId: 'cus_bad' }],
    ['an upper-case currency', { amount: 100, currency: 'EUR', customerId: 'cus_bad' }],
    ['a 4-letter currency', { amount: 100, currency: 'euro', customerId: 'cus_bad' }],
    ['no customerId', { amount: 100, currency: 'eur' }],
    ['a numeric customerId', { amount: 100, currency: 'eur', customerId: 42 }],
    ['an unknown field', { amount: 100, currency: 'eur', customerId: 'cus_bad', extra: 1 }],
  ])('rejects %s with 400 and leaves the key usable', async (name, bad) => {
    const key = `bad-${name.replace(/\W+/g, '-')}`;
    const rejected = await pay(key, bad);
    expect(rejected.status).toBe(400);
    expect(rejected.headers['idempotent-replayed']).toBeUndefined();
    const fixed = await pay(key, { amount: 100, currency: 'eur', customerId: 'cus_fixed' });
    expect(fixed.status).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
    expect((await countRows(db, 'cus_bad')).charges).toBe(0);
  });

  it('refunds once per key; an over-refund is a 400 that is stored and replayed', async () => {
    const payment = (
      await pay('refund-pay', { amount: 1000, currency: 'eur', customerId: 'cus_refund' }).expect(
        201,
      )
    ).body;

    const first = await refund(payment.id, 'refund-1', { amount: 400 });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      id: expect.stringMatching(/^re_/),
      paymentId: payment.id,
      amount: 400,
      createdAt: expect.any(String),
    });
    const again = await refund(payment.id, 'refund-1', { amount: 400 });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.text).toBe(first.text);

    const over = await refund(payment.id, 'refund-2', { amount: 700 });
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({ code: 'refund_exceeds_payment' });
    const overAgain = await refund(payment.id, 'refund-2', { amount: 700 });
    expect(overAgain.status).toBe(400);
    expect(overAgain.headers['idempotent-replayed']).toBe('true');
    expect(overAgain.text).toBe(over.text);

    await refund(payment.id, 'refund-3', { amount: 600 }).expect(201);
    await refund(payment.id, 'refund-4', { amount: 1 }).expect(400);
    await refund(payment.id, 'refund-5', { amount: 0 }).expect(400);

    const rows = await db.query<{ n: number; total: number }>(
      'SELECT count(*)::int AS n, sum(amount)::int AS total FROM refunds WHERE payment_id = $1',
      [payment.id],
    );
    expect(rows[0]).toEqual({ n: 2, total: 1000 });
    const listed = await request(sample.server)
      .get(`/payments/${payment.id}/refunds`)
      .set('X-Account-Id', ACCOUNT)
      .expect(200);
    expect(listed.body.map((r: { amount: number }) => r.amount)).toEqual([400, 600]);
  });

  it('answers 404 for a refund of an unknown payment or of another account’s payment', async () => {
    const payment = (
      await pay('refund-404-pay', {
        amount: 300,
        currency: 'eur',
        customerId: 'cus_refund404',
      }).expect(201)
    ).body;
    const unknown = await refund('pay_does_not_exist', 'refund-404-a', { amount: 1 });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: 'resource_missing' });
    await refund(payment.id, 'refund-404-b', { amount: 1 }, OTHER_ACCOUNT).expect(404);
    const rows = await db.query('SELECT 1 FROM refunds WHERE payment_id = $1', [payment.id]);
    expect(rows).toHaveLength(0);
  });

  it('lists and gets the account’s own payments only', async () => {
    const mine = (
      await pay('list-1', { amount: 10, currency: 'eur', customerId: 'cus_list' }).expect(201)
    ).body;
    const theirs = (
      await pay(
        'list-1',
        { amount: 10, currency: 'eur', customerId: 'cus_list' },
        OTHER_ACCOUNT,
      ).expect(201)
    ).body;

    const got = await request(sample.server)
      .get(`/payments/${mine.id}`)
      .set('X-Account-Id', ACCOUNT)
      .expect(200);
    expect(got.body).toEqual(mine);
    await request(sample.server)
      .get(`/payments/${theirs.id}`)
      .set('X-Account-Id', ACCOUNT)
      .expect(404);
    await request(sample.server)
      .get('/payments/pay_missing')
      .set('X-Account-Id', ACCOUNT)
      .expect(404);

    const list = await request(sample.server)
      .get('/payments')
      .set('X-Account-Id', ACCOUNT)
      .expect(200);
    const ids = list.body.map((p: { id: string }) => p.id);
    expect(ids).toContain(mine.id);
    expect(ids).not.toContain(theirs.id);
    const [count] = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM payments WHERE account_id = $1',
      [ACCOUNT],
    );
    expect(ids).toHaveLength(count.n);
  });

  it('treats the same key from another account as an independent request', async () => {
    const body = { amount: 2000, currency: 'eur', customerId: 'cus_two_accounts' };
    const alice = await pay('shared-key', body, ACCOUNT);
    const bob = await pay('shared-key', body, OTHER_ACCOUNT);
    expect(alice.status).toBe(201);
    expect(bob.status).toBe(201);
    expect(bob.headers['idempotent-replayed']).toBeUndefined();
    expect(bob.body.id).not.toBe(alice.body.id);
    expect(bob.body.chargeId).not.toBe(alice.body.chargeId);
    // Bob may even send a different body under the same key: no 422, it is his key.
    await pay('shared-key', { ...body, amount: 1 }, 'acct_carol').expect(201);
    expect(await countRows(db, 'cus_two_accounts')).toEqual({ payments: 3, charges: 3 });
    const replay = await pay('shared-key', body, OTHER_ACCOUNT);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(bob.text);
  });

  it('runs each charge once under concurrent requests with the same key', async () => {
    const body = { amount: 42, currency: 'eur', customerId: 'cus_concurrent' };
    const responses = await Promise.all(Array.from({ length: 5 }, () => pay('concurrent-1', body)));
    const fresh = responses.filter((r) => r.status === 201 && !r.headers['idempotent-replayed']);
    expect(fresh).toHaveLength(1);
    for (const r of responses) {
      if (r.status === 201) expect(r.text).toBe(fresh[0].text);
      else expect(r.status).toBe(409);
    }
    expect(await countRows(db, 'cus_concurrent')).toEqual({ payments: 1, charges: 1 });
  });
});
