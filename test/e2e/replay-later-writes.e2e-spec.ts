/**
 * After a replay is written, Nest still sends the route's result and an outer interceptor may
 * still set a header: those late writes do nothing (docs/design/internals.md, "Silenced
 * writers"), so the replay goes out whole and nothing is logged as an error.
 */
import { ConsoleLogger, Controller, Post } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { tap } from 'rxjs';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

let runs = 0;

@Controller('late')
class LateController {
  @Post()
  @Idempotent()
  create(): { id: number } {
    runs += 1;
    return { id: runs };
  }
}

/** Stamps every answer once the route's observable emits: after a replay, too late. */
class StampInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler) {
    const res = context.switchToHttp().getResponse();
    return next
      .handle()
      .pipe(
        tap(() =>
          (typeof res.code === 'function' ? res.header : res.setHeader).call(res, 'x-stamp', '1'),
        ),
      );
  }
}

/** Nest's logger, keeping what it reports as errors. */
class ErrorsKept extends ConsoleLogger {
  readonly errors: unknown[] = [];
  override error(message: unknown): void {
    this.errors.push(message);
  }
  override log(): void {}
}

describe.each(ADAPTERS)('writes after a replay on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  const logger = new ErrorsKept();

  beforeAll(async () => {
    runs = 0;
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [LateController],
      logger,
      configure: (app) => {
        app.useGlobalInterceptors(new StampInterceptor());
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('leave the replay as stored and log no error', async () => {
    const key = `late-${adapter}-${Date.now()}`;
    const first = await request(t.server).post('/late').set('Idempotency-Key', key).send({});
    const again = await request(t.server).post('/late').set('Idempotency-Key', key).send({});

    expect(first.status).toBe(201);
    expect(first.headers['x-stamp']).toBe('1');
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.text).toBe(first.text);
    expect(runs).toBe(1);
    expect(logger.errors).toEqual([]);
  });
});
