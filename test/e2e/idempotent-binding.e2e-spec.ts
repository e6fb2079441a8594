/**
 * `@Idempotent()` binds once per route even when its class and its handler both carry it: the
 * handler's own binding serves the route, in the handler's order, so an interceptor listed
 * before it (one that parses the body, as `FileInterceptor` does) has run when the key's
 * fingerprint reads the body. On Express and Fastify; multer's `FileInterceptor` on Express.
 */
import { Body, Controller, Post, UseInterceptors } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** Parses the body from the `x-note` header: a body parser that runs as a route interceptor. */
class NoteBodyInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler) {
    const req = context.switchToHttp().getRequest();
    req.body = { note: req.headers['x-note'] };
    return next.handle();
  }
}

@Controller('bound')
@Idempotent()
class BoundController {
  constructor(private readonly probe: Probe) {}

  /** Class and handler both carry it; the body comes from a handler-level interceptor. */
  @Post('parsed')
  @Idempotent({ responses: { ttlSeconds: 600 } })
  @UseInterceptors(NoteBodyInterceptor)
  parsed(@Body() body: { note: string }) {
    this.probe.count('parsed');
    return { note: body.note, run: this.probe.ran('parsed') };
  }

  /** Class only. */
  @Post('plain')
  plain() {
    this.probe.count('plain');
    return { run: this.probe.ran('plain') };
  }
}

/** A decorated base class whose decorated subclass sets options of its own. */
@Idempotent()
abstract class IdempotentBase {
  constructor(protected readonly probe: Probe) {}
}

@Controller('rebound')
@Idempotent({ responses: { ttlSeconds: 600 } })
class ReboundController extends IdempotentBase {
  @Post()
  create() {
    this.probe.count('rebound');
    return { run: this.probe.ran('rebound') };
  }
}

@Controller('uploads')
@Idempotent()
class UploadsController {
  constructor(private readonly probe: Probe) {}

  @Post()
  @Idempotent()
  @UseInterceptors(FileInterceptor('file'))
  upload(@Body() body: { note: string }) {
    this.probe.count('upload');
    return { note: body.note, run: this.probe.ran('upload') };
  }
}

describe.each(ADAPTERS)('@Idempotent() on a class and its handler (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `bound-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: [BoundController, ReboundController] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const post = (path: string, key: string, note?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return note === undefined ? req : req.set('x-note', note);
  };

  it('runs the handler once and replays: one execution, one replay', async () => {
    const key = newKey();
    const first = await post('/bound/parsed', key, 'a');
    const retry = await post('/bound/parsed', key, 'a');
    expect([first.status, retry.status, retry.headers['idempotent-replayed']]).toEqual([
      201,
      201,
      'true',
    ]);
    expect(retry.body).toEqual(first.body);
    expect(first.body.note).toBe('a');
    const events = t.events.filter((e) => 'key' in e && e.key === key).map((e) => e.type);
    expect(events).toEqual(['executed', 'replayed']);
  });

  it('fingerprints the body the handler-level interceptor parsed: another body is 422', async () => {
    const key = newKey();
    const before = t.probe.ran('parsed');
    expect((await post('/bound/parsed', key, 'a')).status).toBe(201);
    const other = await post('/bound/parsed', key, 'b');
    expect(other.status).toBe(422);
    expect(other.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(t.probe.ran('parsed') - before).toBe(1);
  });

  it.each([
    ['the class alone', '/bound/plain', 'plain'],
    ['a decorated subclass of a decorated base', '/rebound', 'rebound'],
  ])('a route covered by %s runs once and replays', async (_what, path, counter) => {
    const key = newKey();
    const before = t.probe.ran(counter);
    const first = await post(path, key);
    const retry = await post(path, key);
    expect([first.status, retry.status, retry.headers['idempotent-replayed']]).toEqual([
      201,
      201,
      'true',
    ]);
    expect(t.probe.ran(counter) - before).toBe(1);
  });
});

describe('@Idempotent() on a class and a FileInterceptor route (express, multer)', () => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp('express', db, { controllers: [UploadsController] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const upload = (key: string, note: string) =>
    request(t.server)
      .post('/uploads')
      .set('Idempotency-Key', key)
      .field('note', note)
      .attach('file', Buffer.from('file bytes'), 'receipt.txt');

  it('fingerprints the fields multer parsed: same fields replay, other fields are 422', async () => {
    const key = `upload-${Date.now()}`;
    const first = await upload(key, 'a');
    expect(`${first.status} ${JSON.stringify(first.body)}`).toBe('201 {"note":"a","run":1}');
    const retry = await upload(key, 'a');
    expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([201, 'true']);
    const other = await upload(key, 'b');
    expect([other.status, other.body.code]).toEqual([422, 'idempotency_key_reused']);
    expect(t.probe.ran('upload')).toBe(1);
  });
});
