import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

describe.each(ADAPTERS)('smoke (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db);
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('runs once and replays', async () => {
    const first = await request(t.server).post('/orders').set('Idempotency-Key', 'k1').send({ amount: 5 });
    console.log(first.status, first.headers, first.text);
    const second = await request(t.server).post('/orders').set('Idempotency-Key', 'k1').send({ amount: 5 });
    console.log(second.status, second.headers, second.text);
    const missing = await request(t.server).post('/orders').send({ amount: 5 });
    console.log(missing.status, missing.headers, missing.text);
    const decl = await request(t.server).post('/orders/decline').set('Idempotency-Key', 'k2').send({});
    const decl2 = await request(t.server).post('/orders/decline').set('Idempotency-Key', 'k2').send({});
    console.log(decl.status, decl.headers['content-type'], decl.text, decl2.status, decl2.headers, decl2.text);
    console.log(t.probe.runs, await db.query('select scope, idempotency_key, status, response_status from idempotency_records'));
  });
});
