/**
 * A stored response holds the bytes the application's own serializer wrote, so a replay is the
 * first answer byte for byte (docs/design/contract.md#the-decision-table) even when the app does not serialize JSON the default
 * way: Express's `json spaces` and `json replacer` settings, Fastify's `setReplySerializer`,
 * a result whose JSON differs each time it is made (serialized once, on Fastify too), and a
 * handler that returns `null` (an empty body on Express, `null` as JSON on Fastify). A Fastify
 * `preSerialization` hook still runs on the first answer, and what it changes is not stored.
 */
import { Controller, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { storedBodyText } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';
import { internalEnabled } from '../../lib/internals/internal-switch';

let runs = 0;

@Controller('serialized')
class SerializedController {
  @Post('object')
  @Idempotent()
  object() {
    runs++;
    return { id: 'pay_1', amount: 1999, secret: 'not for the wire' };
  }

  /** JSON that differs each time it is made: serialized twice, the wire would not be what is stored. */
  @Post('changing')
  @Idempotent()
  changing() {
    runs++;
    let made = 0;
    return { toJSON: () => ({ id: 'pay_2', serialized: ++made }) };
  }

  @Post('null')
  @Idempotent()
  nothing() {
    runs++;
    return null;
  }
}

/** Two spaces of indentation and no `secret` field: bytes the default serializer never makes. */
function ownSerializer(adapter: AdapterName, app: INestApplication): void {
  const replacer = (key: string, value: unknown) => (key === 'secret' ? undefined : value);
  const instance = app.getHttpAdapter().getInstance();
  if (adapter === 'express') {
    instance.set('json spaces', 2);
    instance.set('json replacer', replacer);
  } else {
    instance.setReplySerializer((payload: unknown) => JSON.stringify(payload, replacer, 2));
  }
}

describe.each(ADAPTERS)("the application's own serializer (%s)", (adapter) => {
  let db: TestDatabase;
  let plain: TestApp;
  let custom: TestApp;
  let n = 0;
  const newKey = () => `serializer-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    plain = await createTestApp(adapter, db, { controllers: [SerializedController] });
    custom = await createTestApp(adapter, db, {
      controllers: [SerializedController],
      configure: (app) => ownSerializer(adapter, app),
    });
  });

  afterAll(async () => {
    await plain?.close();
    await custom?.close();
    await db?.drop();
  });

  /** First answer, then its replay; the handler ran once; the row holds the first bytes. */
  async function firstAndReplay(t: TestApp, path: string) {
    const key = newKey();
    const before = runs;
    const first = await request(t.server).post(path).set('Idempotency-Key', key).send({});
    const replay = await request(t.server).post(path).set('Idempotency-Key', key).send({});
    expect(runs - before).toBe(1);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.status).toBe(first.status);
    expect(replay.headers['content-type']).toBe(first.headers['content-type']);
    expect(replay.text).toBe(first.text);
    expect(await storedBodyText(db, key)).toBe(first.text);
    return first;
  }

  it("stores and replays the bytes of the app's own JSON serializer", async () => {
    const first = await firstAndReplay(custom, '/serialized/object');
    expect(first.status).toBe(201);
    expect(first.text).toBe('{\n  "id": "pay_1",\n  "amount": 1999\n}');
  });

  it('stores and replays the default serializer unchanged', async () => {
    const first = await firstAndReplay(plain, '/serialized/object');
    expect(first.text).toBe('{"id":"pay_1","amount":1999,"secret":"not for the wire"}');
  });

  it('answers first with the bytes it stores, when serializing twice would give other bytes', async () => {
    if (adapter === 'fastify' && !internalEnabled('fastify-serialized-send')) {
      // Its plain path (docs/design/internals.md): Fastify serializes the object again.
      const key = newKey();
      const sent = await request(plain.server)
        .post('/serialized/changing')
        .set('Idempotency-Key', key);
      expect(sent.text).toBe('{"id":"pay_2","serialized":2}');
      expect(await storedBodyText(db, key)).toBe('{"id":"pay_2","serialized":1}');
      return;
    }
    const first = await firstAndReplay(plain, '/serialized/changing');
    expect(first.text).toBe('{"id":"pay_2","serialized":1}');
  });

  it('stores and replays what the adapter makes of a null result', async () => {
    const first = await firstAndReplay(plain, '/serialized/null');
    expect(first.status).toBe(201);
    expect(first.text).toBe(adapter === 'express' ? '' : 'null');
  });
});

/** Fastify only: Express has no hook between its serializer and the wire. */
describe('a Fastify preSerialization hook (a known limit: what it changes is not stored)', () => {
  let db: TestDatabase;
  let app: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await createTestApp('fastify', db, {
      controllers: [SerializedController],
      configure: (nest) =>
        nest
          .getHttpAdapter()
          .getInstance()
          .addHook(
            'preSerialization',
            async (_request: unknown, _reply: unknown, payload: object) => ({
              ...payload,
              wrapped: true,
            }),
          ),
    });
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('still runs on the first answer; the stored bytes and the replays are without its change', async () => {
    const key = `serializer-hook-${Date.now()}`;
    const before = runs;
    const first = await request(app.server)
      .post('/serialized/object')
      .set('Idempotency-Key', key)
      .send({});
    const replay = await request(app.server)
      .post('/serialized/object')
      .set('Idempotency-Key', key)
      .send({});

    expect(runs - before).toBe(1);
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      id: 'pay_1',
      amount: 1999,
      secret: 'not for the wire',
      wrapped: true,
    });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe('{"id":"pay_1","amount":1999,"secret":"not for the wire"}');
    expect(await storedBodyText(db, key)).toBe(replay.text);
  });
});
