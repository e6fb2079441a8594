/**
 * `@IdempotentMutation()` (nest-idempotency/graphql) on PostgreSQL, Apollo on Express and on
 * Fastify: a mutation runs once per key (from the `Idempotency-Key` header or an argument) and
 * every retry gets its first result back, `DateTime` fields included; refusals are GraphQL
 * errors with the library's `extensions.code`; a resolver that throws gives the key back; a
 * transactional resolver's writes commit with its record, and one whose connection is cut is
 * refused with idempotency_store_unavailable and runs again; with the store down nothing runs;
 * queries and unprotected mutations are left alone.
 */
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { DatabaseOutage } from '../fixtures/database-outage';
import { startGraphqlApp } from '../fixtures/graphql-payments';
import type { Probe } from '../fixtures/orders.controller';
import { orderCount } from '../fixtures/record-queries';
import { ADAPTERS } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const PAYMENT = 'id amount note createdAt run';

describe.each(ADAPTERS)('GraphQL mutations run once per key (%s)', (adapter) => {
  let db: TestDatabase;
  let outage: DatabaseOutage;
  let app: Awaited<ReturnType<typeof startGraphqlApp>>['app'];
  let probe: Probe;
  let n = 0;
  const newKey = () => `gql-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    outage = await DatabaseOutage.of(db);
    ({ app, probe } = await startGraphqlApp(adapter, db));
  });

  afterAll(async () => {
    await outage?.end().catch(() => undefined);
    await app?.close();
    await db?.drop();
  });

  /** One GraphQL request; `key` goes in the Idempotency-Key header. */
  const gql = (query: string, variables: object, key?: string, user = 'alice') => {
    const call = request(app.getHttpServer()).post('/graphql').set('x-user', user);
    if (key !== undefined) call.set('Idempotency-Key', key);
    return call.send({ query, variables }).then((response) => {
      expect(response.status).toBe(200);
      return response.body as { data?: Record<string, any> | null; errors?: any[] };
    });
  };

  const PAY = `mutation Pay($amount: Int!, $note: String!, $gate: String, $failFirst: Boolean) {
    pay(amount: $amount, note: $note, gate: $gate, failFirst: $failFirst) { ${PAYMENT} }
  }`;

  const records = async (key: string) =>
    db.query<{ method: string; path: string; status: string }>(
      'SELECT method, path, status FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );

  it('runs a mutation once and answers every retry with its first result', async () => {
    const key = newKey();
    const before = probe.ran('pay');
    const first = await gql(PAY, { amount: 100, note: key }, key);
    const second = await gql(PAY, { amount: 100, note: key }, key);
    expect(first.errors).toBeUndefined();
    expect(first.data!.pay).toMatchObject({ amount: 100, note: key, run: before + 1 });
    expect(first.data!.pay.createdAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    // The same data, a DateTime included, and the resolver did not run again.
    expect(second).toEqual(first);
    expect(probe.ran('pay')).toBe(before + 1);
    expect(await orderCount(db, key)).toBe(1);
    expect(await records(key)).toEqual([{ method: 'MUTATION', path: 'pay', status: 'completed' }]);
  });

  it('keys are per caller: the scope function gets the HTTP request', async () => {
    const key = newKey();
    const alice = await gql(PAY, { amount: 1, note: key }, key, 'alice');
    const bob = await gql(PAY, { amount: 1, note: key }, key, 'bob');
    expect(bob.data!.pay.id).not.toBe(alice.data!.pay.id);
    expect(await orderCount(db, key)).toBe(2);
  });

  it('refuses a duplicate while the first runs with idempotency_key_in_use, then replays', async () => {
    const key = newKey();
    const variables = { amount: 7, note: key, gate: key };
    const before = probe.ran('pay');
    const first = gql(PAY, variables, key);
    await waitFor(async () => probe.ran('pay') === before + 1);
    const [a, b] = await Promise.all([gql(PAY, variables, key), gql(PAY, variables, key)]);
    for (const duplicate of [a, b]) {
      expect(duplicate.data).toBeNull();
      expect(duplicate.errors).toHaveLength(1);
      expect(duplicate.errors![0]).toMatchObject({
        path: ['pay'],
        extensions: { code: 'idempotency_key_in_use', status: 409, retryAfterSeconds: 1 },
      });
    }
    probe.open(key);
    const answered = await first;
    expect(answered.errors).toBeUndefined();
    expect(await gql(PAY, variables, key)).toEqual(answered);
    expect(probe.ran('pay')).toBe(before + 1);
    expect(await orderCount(db, key)).toBe(1);
  });

  it('five identical calls at once: one runs, the four others get idempotency_key_in_use', async () => {
    const key = newKey();
    const variables = { amount: 11, note: key, gate: key };
    const before = probe.ran('pay');
    const answers: Array<Awaited<ReturnType<typeof gql>>> = [];
    const calls = Array.from({ length: 5 }, () =>
      gql(PAY, variables, key).then((answer) => answers.push(answer)),
    );
    await waitFor(async () => answers.length === 4);
    expect(probe.ran('pay')).toBe(before + 1);
    for (const refused of answers) {
      expect(refused.errors![0].extensions.code).toBe('idempotency_key_in_use');
    }
    probe.open(key);
    await Promise.all(calls);
    expect(answers[4].errors).toBeUndefined();
    expect(answers[4].data!.pay).toMatchObject({ amount: 11, note: key });
    expect(probe.ran('pay')).toBe(before + 1);
    expect(await orderCount(db, key)).toBe(1);
  });

  it('refuses the key with other arguments, or with another mutation: idempotency_key_reused', async () => {
    const key = newKey();
    await gql(PAY, { amount: 5, note: key }, key);
    const before = probe.ran('pay');
    const otherArgs = await gql(PAY, { amount: 6, note: key }, key);
    expect(otherArgs.errors![0].extensions).toMatchObject({
      code: 'idempotency_key_reused',
      status: 422,
    });
    const otherField = await gql(
      'mutation { payObservable(amount: 5, note: "x") { id } }',
      {},
      key,
    );
    expect(otherField.errors![0].extensions.code).toBe('idempotency_key_reused');
    expect(probe.ran('pay')).toBe(before);
    expect(await orderCount(db, key)).toBe(1);
  });

  it('one key for two fields of one document: the same call once, another call refused', async () => {
    const key = newKey();
    const same = await gql(
      `mutation { a: pay(amount: 3, note: "${key}") { id run } b: pay(amount: 3, note: "${key}") { id run } }`,
      {},
      key,
    );
    expect(same.errors).toBeUndefined();
    expect(same.data!.b).toEqual(same.data!.a);
    expect(await orderCount(db, key)).toBe(1);

    const other = newKey();
    const differ = await gql(
      `mutation { a: pay(amount: 3, note: "${other}") { id } b: pay(amount: 4, note: "${other}") { id } }`,
      {},
      other,
    );
    // The first field ran; the second was refused (its null, on a non-null field, nulls data).
    expect(differ.data).toBeNull();
    expect(differ.errors).toHaveLength(1);
    expect(differ.errors![0]).toMatchObject({
      path: ['b'],
      extensions: { code: 'idempotency_key_reused' },
    });
    expect(await records(other)).toEqual([
      { method: 'MUTATION', path: 'pay', status: 'completed' },
    ]);
    expect(await orderCount(db, other)).toBe(1);
  });

  it('refuses a required mutation without a key, or with a malformed one; nothing runs', async () => {
    const before = probe.ran('pay');
    const answer = await gql(PAY, { amount: 1, note: 'no key' });
    expect(answer.data).toBeNull();
    expect(answer.errors![0]).toMatchObject({
      path: ['pay'],
      extensions: { code: 'idempotency_key_missing', status: 400 },
    });
    expect(answer.errors![0].message).toContain('Idempotency-Key');
    // A malformed header (a bare key with a comma) is refused the way an HTTP route refuses it.
    const malformed = await gql(PAY, { amount: 1, note: 'no key' }, 'a,b');
    expect(malformed.errors![0].extensions).toMatchObject({
      code: 'idempotency_key_invalid',
      status: 400,
    });
    expect(probe.ran('pay')).toBe(before);
    expect(await orderCount(db, 'no key')).toBe(0);
  });

  it('runs a mutation with required: false and no key unprotected, every time', async () => {
    const note = newKey();
    const query = `mutation { payMaybe(amount: 1, note: "${note}") { id } }`;
    const first = await gql(query, {});
    const second = await gql(query, {});
    expect(second.data!.payMaybe.id).not.toBe(first.data!.payMaybe.id);
    expect(await orderCount(db, note)).toBe(2);
  });

  describe('the key in an argument', () => {
    const PAY_WITH_KEY = `mutation ($key: String, $amount: Int!, $note: String!) {
      payWithKey(idempotencyKey: $key, amount: $amount, note: $note) { ${PAYMENT} }
    }`;

    it('runs once per key, whatever the header says', async () => {
      const key = newKey();
      const before = probe.ran('payWithKey');
      const first = await gql(PAY_WITH_KEY, { key, amount: 9, note: key }, 'header-1');
      const second = await gql(PAY_WITH_KEY, { key, amount: 9, note: key }, 'header-2');
      const noHeader = await gql(PAY_WITH_KEY, { key, amount: 9, note: key });
      expect(first.errors).toBeUndefined();
      expect(second).toEqual(first);
      expect(noHeader).toEqual(first);
      expect(probe.ran('payWithKey')).toBe(before + 1);
      expect(await records(key)).toEqual([
        { method: 'MUTATION', path: 'payWithKey', status: 'completed' },
      ]);
      const reused = await gql(PAY_WITH_KEY, { key, amount: 10, note: key });
      expect(reused.errors![0].extensions.code).toBe('idempotency_key_reused');
      expect(reused.errors![0].message).toBe(
        'The key in the "idempotencyKey" argument was already used with other data. Use a new key for a new mutation.',
      );
    });

    it('refuses no key and an invalid key', async () => {
      const before = probe.ran('payWithKey');
      const missing = await gql(PAY_WITH_KEY, { amount: 1, note: 'x' }, newKey());
      expect(missing.errors![0].extensions).toMatchObject({
        code: 'idempotency_key_missing',
        status: 400,
      });
      expect(missing.errors![0].message).toMatch(
        /^This mutation needs a key in the "idempotencyKey" argument:/,
      );
      const empty = await gql(PAY_WITH_KEY, { key: '', amount: 1, note: 'x' });
      expect(empty.errors![0].extensions.code).toBe('idempotency_key_invalid');
      const tooLong = await gql(PAY_WITH_KEY, { key: 'k'.repeat(256), amount: 1, note: 'x' });
      expect(tooLong.errors![0].extensions.code).toBe('idempotency_key_invalid');
      expect(probe.ran('payWithKey')).toBe(before);
    });
  });

  it('a resolver that throws gives the key back: the retry runs it', async () => {
    const key = newKey();
    const variables = { amount: 2, note: key, failFirst: true };
    const before = probe.ran('pay');
    const failed = await gql(PAY, variables, key);
    expect(failed.data).toBeNull();
    expect(failed.errors![0].message).toBe('the provider declined to answer');
    expect(await records(key)).toEqual([{ method: 'MUTATION', path: 'pay', status: 'released' }]);
    const retried = await gql(PAY, variables, key);
    expect(retried.errors).toBeUndefined();
    expect(retried.data!.pay.run).toBe(before + 2);
    expect(await gql(PAY, variables, key)).toEqual(retried);
    expect(probe.ran('pay')).toBe(before + 2);
  });

  it('transactional: the resolver writes commit with its record, or not at all', async () => {
    const key = newKey();
    const query = `mutation { payInTransaction(amount: 4, note: "${key}", failFirst: true) { ${PAYMENT} } }`;
    const before = probe.ran('payInTransaction');
    const failed = await gql(query, {}, key);
    expect(failed.errors![0].message).toBe('the provider declined to answer');
    // Its row went with the rolled-back transaction, and the key was given back.
    expect(await orderCount(db, key)).toBe(0);
    expect(await records(key)).toEqual([
      { method: 'MUTATION', path: 'payInTransaction', status: 'released' },
    ]);
    const retried = await gql(query, {}, key);
    expect(retried.errors).toBeUndefined();
    expect(await orderCount(db, key)).toBe(1);
    expect(await records(key)).toEqual([
      { method: 'MUTATION', path: 'payInTransaction', status: 'completed' },
    ]);
    expect(await gql(query, {}, key)).toEqual(retried);
    expect(probe.ran('payInTransaction')).toBe(before + 2);
  });

  it('transactional: a run whose connection is cut is refused with idempotency_store_unavailable, and the retry runs', async () => {
    const key = newKey();
    const query = `mutation { payInTransaction(amount: 6, note: "${key}", cutFirst: true) { ${PAYMENT} } }`;
    const before = probe.ran('payInTransaction');
    const cut = await gql(query, {}, key);
    expect(cut.errors![0].extensions).toMatchObject({
      code: 'idempotency_store_unavailable',
      status: 503,
      retryAfterSeconds: 1,
    });
    expect(await orderCount(db, key)).toBe(0);
    expect(await records(key)).toEqual([
      { method: 'MUTATION', path: 'payInTransaction', status: 'released' },
    ]);
    const retried = await gql(query, {}, key);
    expect(retried.errors).toBeUndefined();
    expect(await gql(query, {}, key)).toEqual(retried);
    expect(await orderCount(db, key)).toBe(1);
    expect(probe.ran('payInTransaction')).toBe(before + 2);
  });

  it('an Observable result and an inherited resolver run once too', async () => {
    const key = newKey();
    const observable = `mutation { payObservable(amount: 8, note: "${key}") { ${PAYMENT} } }`;
    const first = await gql(observable, {}, key);
    expect(first.errors).toBeUndefined();
    expect(await gql(observable, {}, key)).toEqual(first);
    expect(await orderCount(db, key)).toBe(1);

    const refundKey = newKey();
    const before = probe.ran('refund');
    const refund = await gql('mutation { refund(amount: 3) }', {}, refundKey);
    expect(refund).toEqual({ data: { refund: 300 + before + 1 } });
    expect(await gql('mutation { refund(amount: 3) }', {}, refundKey)).toEqual(refund);
    expect(probe.ran('refund')).toBe(before + 1);
  });

  it('under a class-level @Idempotent(): the mutation runs once, the query refuses to run', async () => {
    const key = newKey();
    const before = probe.ran('charge');
    const first = await gql('mutation { charge(amount: 4) }', {}, key);
    expect(first).toEqual({ data: { charge: 400 + before + 1 } });
    expect(await gql('mutation { charge(amount: 4) }', {}, key)).toEqual(first);
    expect(probe.ran('charge')).toBe(before + 1);
    expect(await records(key)).toEqual([
      { method: 'MUTATION', path: 'charge', status: 'completed' },
    ]);
    const query = await gql('{ charges }', {}, newKey());
    expect(query.errors![0].message).toContain('@IdempotentMutation()');
    expect(probe.ran('charges')).toBe(0);
  });

  it('a result over maxResponseBytes: the first call gets it, a retry is told not to retry', async () => {
    const key = newKey();
    const query = `mutation { receipt(text: "${'r'.repeat(100)}") }`;
    const before = probe.ran('receipt');
    expect(await gql(query, {}, key)).toEqual({ data: { receipt: 'r'.repeat(100) } });
    const retry = await gql(query, {}, key);
    expect(retry.data).toBeNull();
    expect(retry.errors![0].extensions).toMatchObject({
      code: 'idempotency_response_not_stored',
      status: 409,
    });
    expect(probe.ran('receipt')).toBe(before + 1);
  });

  it('storeBody: false: the secret goes to the first call only, a retry is told it ran', async () => {
    const key = newKey();
    const query = 'mutation { createApiKey(name: "ci") }';
    const before = probe.ran('createApiKey');
    const first = await gql(query, {}, key);
    expect(first).toEqual({ data: { createApiKey: `sk_ci_${before + 1}` } });
    const retry = await gql(query, {}, key);
    expect(retry.data).toBeNull();
    expect(retry.errors![0].extensions).toMatchObject({
      code: 'idempotency_response_not_stored',
      status: 409,
    });
    expect(JSON.stringify(retry)).not.toContain('sk_ci_');
    const [row] = await db.query<{ body: Buffer | null }>(
      'SELECT response_body AS body FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    expect(String(row.body ?? '')).not.toContain('sk_ci_');
    expect(probe.ran('createApiKey')).toBe(before + 1);
  });

  it('leaves queries alone: they run every time and store nothing', async () => {
    const key = newKey();
    const before = probe.ran('orders');
    const query = 'query ($note: String!) { orders(note: $note) }';
    expect(await gql(query, { note: key }, key)).toEqual({ data: { orders: 0 } });
    expect(await gql(query, { note: key }, key)).toEqual({ data: { orders: 0 } });
    expect(await gql(query, { note: key })).toEqual({ data: { orders: 0 } });
    expect(probe.ran('orders')).toBe(before + 3);
    expect(await records(key)).toEqual([]);
  });

  it('plain @Idempotent() on a resolver refuses to run, naming the decorator to use', async () => {
    const before = probe.ran('payPlainIdempotent');
    const answer = await gql('mutation { payPlainIdempotent(amount: 1) { id } }', {}, newKey());
    expect(answer.data).toEqual({ payPlainIdempotent: null });
    expect(answer.errors![0].message).toContain('@IdempotentMutation()');
    expect(probe.ran('payPlainIdempotent')).toBe(before);
  });

  it('with the store unreachable, refuses with idempotency_store_unavailable and runs nothing', async () => {
    const key = newKey();
    const before = probe.ran('pay');
    await outage.begin();
    try {
      const answer = await gql(PAY, { amount: 1, note: key }, key);
      expect(answer.data).toBeNull();
      expect(answer.errors![0].extensions).toMatchObject({
        code: 'idempotency_store_unavailable',
        status: 503,
        retryAfterSeconds: 1,
      });
    } finally {
      await outage.end();
    }
    expect(probe.ran('pay')).toBe(before);
    expect(await orderCount(db, key)).toBe(0);
  });
});
