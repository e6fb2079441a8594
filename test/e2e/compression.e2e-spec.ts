/**
 * Behind the compression middleware Nest's docs recommend (`compression` on Express,
 * `@fastify/compress` on Fastify): the stored body is the uncompressed answer, so a replay is
 * compressed again for a client that accepts it and sent as it is for one that does not, and
 * either way decodes to the first answer's bytes; the handler runs once.
 */
import fastifyCompress from '@fastify/compress';
import { Body, Controller, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import compression from 'compression';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { storedBodyText } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';

let runs = 0;

@Controller('statements')
class StatementsController {
  @Post()
  @Idempotent()
  create(@Body() body: { lines: number }) {
    runs++;
    // Well over both middlewares' default threshold (1 KiB), and very compressible.
    return {
      id: `st_${runs}`,
      lines: Array.from({ length: body.lines }, (_, i) => ({
        n: i,
        amount: 1999,
        currency: 'eur',
      })),
    };
  }
}

async function compress(adapter: AdapterName, app: INestApplication): Promise<void> {
  if (adapter === 'express') app.use(compression());
  else await (app as any).register(fastifyCompress);
}

describe.each(ADAPTERS)('behind compression middleware (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `gzip-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [StatementsController],
      configure: (app) => compress(adapter, app),
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  /** supertest decodes a gzip body: `text` is what the client reads after decoding. */
  const post = (key: string, encoding: string) =>
    request(t.server)
      .post('/statements')
      .set('Idempotency-Key', key)
      .set('Accept-Encoding', encoding)
      .send({ lines: 200 });

  it('stores the uncompressed answer and replays it compressed or not, as each client asks', async () => {
    const key = newKey();
    const before = runs;
    const first = await post(key, 'gzip');
    expect(first.status).toBe(201);
    expect(first.headers['content-encoding']).toBe('gzip');
    const text = first.text;
    expect(JSON.parse(text).lines).toHaveLength(200);

    expect(await storedBodyText(db, key)).toBe(text);

    const gzipped = await post(key, 'gzip');
    expect(gzipped.status).toBe(201);
    expect(gzipped.headers['idempotent-replayed']).toBe('true');
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.text).toBe(text);

    const identity = await post(key, 'identity');
    expect(identity.status).toBe(201);
    expect(identity.headers['idempotent-replayed']).toBe('true');
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(identity.text).toBe(text);
    expect(runs - before).toBe(1);
  });

  it('runs a same-key storm of 20 once', async () => {
    const key = newKey();
    const before = runs;
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(key, 'gzip')));
    expect(answers.map((a) => a.status).filter((s) => s !== 201 && s !== 409)).toEqual([]);
    expect(runs - before).toBe(1);
    const texts = new Set(answers.filter((a) => a.status === 201).map((a) => a.text));
    expect(texts.size).toBe(1);
  });
});
