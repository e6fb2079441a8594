/**
 * Behind Nest's `ClassSerializerInterceptor`, global and so outside the library's own
 * interceptor (the docs' way to keep `@Exclude()` fields such as secrets out of answers): the
 * stored body is the serialized answer, so a replay is the first answer byte for byte and never
 * carries an excluded field; the handler runs once.
 */
import { Body, ClassSerializerInterceptor, Controller, Post } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Exclude, Expose } from 'class-transformer';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { storedBodyText } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

let runs = 0;

class Customer {
  id!: string;
  email!: string;
  @Exclude()
  cardToken!: string;

  constructor(fields: Partial<Customer>) {
    Object.assign(this, fields);
  }

  @Expose()
  get domain(): string {
    return this.email.split('@')[1];
  }
}

@Controller('customers')
class CustomersController {
  @Post()
  @Idempotent()
  create(@Body() body: { email: string }): Customer {
    runs++;
    return new Customer({ id: `cus_${runs}`, email: body.email, cardToken: 'tok_secret' });
  }
}

describe.each(ADAPTERS)('behind a global ClassSerializerInterceptor (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [CustomersController],
      configure: (app) => {
        app.useGlobalInterceptors(new ClassSerializerInterceptor(app.get(Reflector)));
      },
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('stores and replays the serialized answer, without the excluded field', async () => {
    const key = `class-serializer-${adapter}-${Date.now()}`;
    const before = runs;
    const post = () =>
      request(t.server)
        .post('/customers')
        .set('Idempotency-Key', key)
        .send({ email: 'ada@example.com' });
    const first = await post();
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      id: `cus_${before + 1}`,
      email: 'ada@example.com',
      domain: 'example.com',
    });
    const replay = await post();
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(replay.text).not.toContain('tok_secret');
    expect(await storedBodyText(db, key)).toBe(first.text);
    expect(runs - before).toBe(1);
  });
});
