/**
 * A transactional route whose transaction's connection is cut while the handler runs answers 503
 * `idempotency_store_unavailable` with `Retry-After` whatever the way the app is written
 * (test/e2e/transaction-cut.e2e-spec.ts covers a handler that returns a value): `@Redirect()`,
 * `@Res()` answering after its writes or before them, `@Res({ passthrough: true })`, a
 * `StreamableFile`, global interceptors (the NestJS docs' TimeoutInterceptor, an envelope), a
 * handler inherited from an undecorated base, a route of a subclass of a decorated base, and a
 * mixin — on Express and Fastify, cut between statements and mid-statement. The handler's row
 * is never committed, the key is released, the retry runs the handler and gets the route's own
 * answer, and the next retry replays it (a stream, never stored, runs again).
 */
import {
  Body,
  Controller,
  HttpException,
  Inject,
  InternalServerErrorException,
  Post,
  Redirect,
  Res,
  StreamableFile,
} from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Readable } from 'node:stream';
import { catchError, map, throwError } from 'rxjs';
import type { Observable } from 'rxjs';
import { IdempotencyContext, Idempotent } from '../../lib';
import { CUTS, armCut, disarmCut, runsOf, writeOrderAcrossCut } from '../fixtures/connection-cut';
import type { Cut } from '../fixtures/connection-cut';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { orderCount } from '../fixtures/record-queries';
import { TimeoutInterceptor, postWithKey, recordOf } from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

/** Request body of every route here: `note` is unique per case and names its row and runs. */
interface CutBody {
  note: string;
}

const TRANSACTIONAL = { execution: { transactional: true } } as const;

/** Express's `res.json`, or a Fastify reply's `send` of an object. */
function sendJson(res: any, status: number, body: object): void {
  if (typeof res.json === 'function') res.status(status).json(body);
  else res.status(status).send(body);
}

/** One transactional route per way of answering. */
@Controller('cut')
class CutStylesController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  private write(body: CutBody): Promise<number> {
    return writeOrderAcrossCut(this.idempotency.entityManager, body.note);
  }

  @Post('value')
  @Idempotent(TRANSACTIONAL)
  async value(@Body() body: CutBody) {
    return { order: await this.write(body) };
  }

  @Post('redirect')
  @Idempotent(TRANSACTIONAL)
  @Redirect('/orders/fallback', 302)
  async redirect(@Body() body: CutBody) {
    return { url: `/orders/${await this.write(body)}`, statusCode: 303 };
  }

  /** `@Res()`: answers once its write is done. */
  @Post('res')
  @Idempotent(TRANSACTIONAL)
  async res(@Body() body: CutBody, @Res() res: any) {
    sendJson(res, 201, { order: await this.write(body) });
  }

  /** `@Res()`: answers first, then writes (the answer is held until the handler settles). */
  @Post('res-first')
  @Idempotent(TRANSACTIONAL)
  async resFirst(@Body() body: CutBody, @Res() res: any) {
    sendJson(res, 201, { accepted: body.note });
    await this.write(body);
  }

  @Post('res-passthrough')
  @Idempotent(TRANSACTIONAL)
  async resPassthrough(@Body() body: CutBody, @Res({ passthrough: true }) res: any) {
    const order = await this.write(body);
    res.header('Location', `/orders/${order}`);
    return { order };
  }

  @Post('stream')
  @Idempotent(TRANSACTIONAL)
  async stream(@Body() body: CutBody) {
    await this.write(body);
    return new StreamableFile(Readable.from([Buffer.from('chunk-1;'), Buffer.from('chunk-2')]));
  }
}

/** Services by property injection: a base class without a class decorator has no paramtypes. */
abstract class CutWriter {
  @Inject(IdempotencyContext) idempotency!: IdempotencyContext;
}

/** (a) An undecorated base whose handler a decorated subclass serves. */
abstract class UndecoratedCutBase extends CutWriter {
  @Post()
  async create(@Body() body: CutBody) {
    return { order: await writeOrderAcrossCut(this.idempotency.entityManager, body.note) };
  }
}

@Controller('cut-inherited')
@Idempotent(TRANSACTIONAL)
class InheritedCutController extends UndecoratedCutBase {}

/** (b) The decorator on a base class; the route comes from the subclass. */
@Idempotent(TRANSACTIONAL)
abstract class TransactionalCutBase extends CutWriter {}

@Controller('cut-subclassed')
class SubclassedCutController extends TransactionalCutBase {
  @Post()
  async create(@Body() body: CutBody) {
    return { order: await writeOrderAcrossCut(this.idempotency.entityManager, body.note) };
  }
}

/** (c) A mixin that adds the handler. */
function WithCutCreate<TBase extends abstract new (...args: any[]) => CutWriter>(Base: TBase) {
  abstract class WithCutCreateMixin extends Base {
    @Post()
    async create(@Body() body: CutBody) {
      return { order: await writeOrderAcrossCut(this.idempotency.entityManager, body.note) };
    }
  }
  return WithCutCreateMixin;
}

@Controller('cut-mixed')
@Idempotent(TRANSACTIONAL)
class MixedCutController extends WithCutCreate(CutWriter) {}

/** An app's envelope: values as `{ data }`, errors that are not HTTP errors as a plain 500. */
class EnvelopeInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((data) => ({ data })),
      catchError((error) =>
        throwError(() =>
          error instanceof HttpException ? error : new InternalServerErrorException('failed'),
        ),
      ),
    );
  }
}

/** A route, and what its client gets when nothing is cut. */
type Style = [route: string, path: string, status: number, stored: boolean];

const STYLES: Style[] = [
  ['@Redirect() with a returned url', '/cut/redirect', 303, true],
  ['@Res() answering after its write', '/cut/res', 201, true],
  ['@Res() answering before its write', '/cut/res-first', 201, true],
  ['@Res({ passthrough: true })', '/cut/res-passthrough', 201, true],
  ['StreamableFile (never stored)', '/cut/stream', 201, false],
  ['(a) handler of an undecorated base class', '/cut-inherited', 201, true],
  ['(b) @Idempotent() on the base class, route on the subclass', '/cut-subclassed', 201, true],
  ['(c) handler from a mixin', '/cut-mixed', 201, true],
];

/** The status and body of a response, so that a failed expectation shows why. */
const answerOf = (response: { status: number; body: Buffer }) =>
  `${response.status} ${response.body.toString('utf8')}`;

describe.each(ADAPTERS)('a transactional route whose connection is cut (%s)', (adapter) => {
  let db: TestDatabase;
  let n = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(() => disarmCut());
  afterAll(async () => {
    await db?.drop();
  });

  /**
   * Sends a request whose connection is cut `cut`, then the retry with the same key, then one
   * more: 503 with nothing committed and the key released; the route's own answer from a second
   * run; then its replay (or, for a stream, a third run).
   */
  async function expectCutThenRun(
    t: TestApp,
    [, path, status, stored]: Style,
    cut: Cut,
  ): Promise<void> {
    const key = `cut-styles-${adapter}-${++n}-${Date.now()}`;
    const send = () => postWithKey(t.server, path, key, { note: key });

    armCut(db, cut);
    const cutOff = await send();
    expect(answerOf(cutOff)).toMatch(/^503 /);
    expect(cutOff.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(cutOff.headers['retry-after']).toBe('1');
    expect(JSON.parse(cutOff.body.toString('utf8')).code).toBe('idempotency_store_unavailable');
    expect(await orderCount(db, key)).toBe(0);
    expect(await recordOf(db, key)).toEqual({ status: 'released', response_status: null });

    disarmCut();
    const retry = await send();
    expect(answerOf(retry)).toMatch(new RegExp(`^${status} `));
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(runsOf(key)).toBe(2);
    if (!stored) {
      // A stream's key is released once it is sent, and the next request runs again.
      await waitFor(async () => (await recordOf(db, key))?.status !== 'in_flight', 3000);
      const again = await send();
      expect(answerOf(again)).toBe(answerOf(retry));
      expect(runsOf(key)).toBe(3);
      return;
    }
    expect(await orderCount(db, key)).toBe(1);

    const replay = await send();
    expect(answerOf(replay)).toBe(answerOf(retry));
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers.location).toBe(retry.headers.location);
    expect(runsOf(key)).toBe(2);
    expect(await orderCount(db, key)).toBe(1);
  }

  describe('route styles', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp(adapter, db, {
        controllers: [
          CutStylesController,
          InheritedCutController,
          SubclassedCutController,
          MixedCutController,
        ],
        module: { errors: { retryAfterSeconds: 1 } },
      });
    });
    afterAll(async () => {
      await t?.close();
    });

    describe.each(STYLES)('%s', (...style) => {
      it.each(CUTS)('cut %s: 503 with Retry-After, then the retry runs', async (cut) => {
        await expectCutThenRun(t, style, cut);
      });
    });
  });

  describe('under global interceptors (APP_INTERCEPTOR and useGlobalInterceptors)', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await createTestApp(adapter, db, {
        controllers: [CutStylesController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
        configure: (app) => void app.useGlobalInterceptors(new EnvelopeInterceptor()),
        module: { errors: { retryAfterSeconds: 1 } },
      });
    });
    afterAll(async () => {
      await t?.close();
    });

    it.each(CUTS)('cut %s: 503 with Retry-After, then the retry runs', async (cut) => {
      await expectCutThenRun(t, ['a returned value', '/cut/value', 201, true], cut);
    });
  });
});
