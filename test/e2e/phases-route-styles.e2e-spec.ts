/**
 * Operations in phases under the route styles an application uses besides a plain `@Post()`
 * returning `run()`'s result: a global timeout interceptor that answers 408 while the operation
 * still runs, inherited and mixin controllers, `@Res()` (the handler writes the response itself)
 * and `@Redirect()`. In each: every step runs once, the provider is called once, the client gets
 * the answer the operation's last step gave (with `@Res()` and `@Redirect()` too: what the
 * handler writes or the decorator asks for is superseded), and a retry gets it byte for byte.
 * On Express and Fastify.
 */
import { Body, Controller, Post, Redirect, Res } from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { Idempotent } from '../../lib';
import { IdempotencyOperations } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { CreateTransfer, TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import type { TransferInput } from '../fixtures/phased-transfers';
import { TimeoutInterceptor, postWithKey, recordOf } from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

/** A base class whose route runs the operation; subclasses only name their path. */
abstract class TransfersBase {
  constructor(protected readonly operations: IdempotencyOperations) {}

  @Post()
  @Idempotent()
  create(@Body() body: TransferInput): Promise<unknown> {
    return this.operations.run(CreateTransfer, body);
  }
}

@Controller('inherited-transfers')
class InheritedTransfersController extends TransfersBase {
  constructor(operations: IdempotencyOperations) {
    super(operations);
  }
}

/** A mixin adding the route to any class. */
function WithTransfers<TBase extends abstract new (...args: any[]) => object>(Base: TBase) {
  abstract class Mixed extends Base {
    protected abstract readonly operations: IdempotencyOperations;

    @Post()
    @Idempotent()
    create(@Body() body: TransferInput): Promise<unknown> {
      return this.operations.run(CreateTransfer, body);
    }
  }
  return Mixed;
}

@Controller('mixin-transfers')
class MixinTransfersController extends WithTransfers(class {}) {
  constructor(protected readonly operations: IdempotencyOperations) {
    super();
  }
}

@Controller('styled-transfers')
class StyledTransfersController {
  constructor(private readonly operations: IdempotencyOperations) {}

  /** `@Res()`: the handler writes the operation's result itself. */
  @Post('res')
  @Idempotent()
  async withRes(@Body() body: TransferInput, @Res() res: any): Promise<void> {
    const result = await this.operations.run(CreateTransfer, body);
    if (typeof res.code === 'function') res.code(201).send(result);
    else res.status(201).json(result);
  }

  /** `@Redirect()` on a route whose operation answers 201 with a body. */
  @Post('redirect')
  @Idempotent()
  @Redirect('/elsewhere', 303)
  withRedirect(@Body() body: TransferInput): Promise<unknown> {
    return this.operations.run(CreateTransfer, body);
  }
}

const CONTROLLERS: Type[] = [
  InheritedTransfersController,
  MixinTransfersController,
  StyledTransfersController,
];

describe.each(ADAPTERS)('operations in phases across route styles (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  let n = 0;
  const newKey = () => `styles-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      ...TRANSFERS,
      controllers: [...TRANSFERS.controllers, ...CONTROLLERS],
      phases: { completer: false, jobs: false },
    });
    hooks = t.app.get(TransferHooks);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  /** Every step of `key` ran once and the provider sent once. */
  function expectRanOnce(key: string): void {
    expect(['reserved', 'sent', 'settled'].map((step) => hooks.ran(key, step))).toEqual([1, 1, 1]);
    expect([...hooks.sent.keys()].filter((k) => hooks.callsWith(k).length > 1)).toEqual([]);
  }

  /** The answer the operation's last step gave (status, Location, its own header, body). */
  function expectOperationAnswer(response: any, amount: number): void {
    expect(response.status).toBe(201);
    expect(response.headers.location).toMatch(/^\/transfers\/\d+$/);
    expect(response.headers['x-not-replayed']).toBe('yes');
    expect(JSON.parse(response.body.toString())).toEqual({
      ledgerId: Number(response.headers.location.split('/')[2]),
      providerId: expect.stringMatching(/^tr_\d+$/),
      amount,
    });
  }

  it.each([
    ['/transfers', 'the plain route'],
    ['/inherited-transfers', 'an inherited controller'],
    ['/mixin-transfers', 'a mixin controller'],
  ])('%s (%s): runs once, replays the stored answer', async (path) => {
    const key = newKey();
    const body = { amount: 12, to: 'acct_b' };
    const first = await postWithKey(t.server, path, key, body);
    expectOperationAnswer(first, 12);
    const replay = await postWithKey(t.server, path, key, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
    expectRanOnce(key);
  });

  it('@Res(): the client gets the operation’s answer, not the handler’s own write; a retry replays it', async () => {
    const key = newKey();
    const body = { amount: 13, to: 'acct_b' };
    const first = await postWithKey(t.server, '/styled-transfers/res', key, body);
    expectOperationAnswer(first, 13);
    expect(first.status).toBe(201);
    const replay = await postWithKey(t.server, '/styled-transfers/res', key, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.toString()).toBe(first.body.toString());
    expectRanOnce(key);
  });

  it('@Redirect(): the client gets the operation’s 201, not the redirect; a retry replays it', async () => {
    const key = newKey();
    const body = { amount: 14, to: 'acct_b' };
    const first = await postWithKey(t.server, '/styled-transfers/redirect', key, body);
    expectOperationAnswer(first, 14);
    const replay = await postWithKey(t.server, '/styled-transfers/redirect', key, body);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect({ status: replay.status, location: replay.headers.location }).toEqual({
      status: first.status,
      location: first.headers.location,
    });
    expect(replay.body.toString()).toBe(first.body.toString());
    expectRanOnce(key);
  });
});

describe.each(ADAPTERS)('an operation under a global TimeoutInterceptor (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  const release: Array<() => void> = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      ...TRANSFERS,
      phases: { completer: false, jobs: false },
      providers: [
        ...TRANSFERS.providers,
        { provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor },
      ],
    });
    hooks = t.app.get(TransferHooks);
  });

  afterEach(() => {
    for (const open of release.splice(0)) open();
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('408 to the first client, 409 while the steps run, then the replay of the 201', async () => {
    const key = `timeout-${adapter}-${Date.now()}`;
    const body = { amount: 15, to: 'acct_b' };
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    release.push(open);
    // The local step waits: it has no time limit of its own, where the foreign step's 0.3 s
    // would end the run (503) before the interceptor's timeout answers.
    hooks.before.set('reserved', async (context: any) => {
      if (context.identity?.key === key) await gate;
    });

    const first = await postWithKey(t.server, '/transfers', key, body);
    expect(first.status).toBe(408);
    const during = await postWithKey(t.server, '/transfers', key, body);
    expect(during.status).toBe(409);
    expect(JSON.parse(during.body.toString()).code).toBe('idempotency_key_in_use');

    open();
    await waitFor(async () => (await recordOf(db, key))?.status === 'completed', 3000);
    const replay = await postWithKey(t.server, '/transfers', key, body);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(JSON.parse(replay.body.toString())).toMatchObject({ amount: 15 });
    expect(['reserved', 'sent', 'settled'].map((step) => hooks.ran(key, step))).toEqual([1, 1, 1]);
    hooks.before.delete('reserved');
  });
});
