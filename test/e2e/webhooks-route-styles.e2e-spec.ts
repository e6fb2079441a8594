/**
 * `@IdempotentWebhook()` under the route styles an application uses besides a handler that
 * returns its answer: `@Res()` (the handler answers itself), `@Redirect()`, handlers inherited
 * from a base class or added by a mixin, an operation in phases run by the handler, and a global
 * TimeoutInterceptor that answers 408 while the handler still runs. In each, a verified
 * delivery runs the handler once per event id, and every redelivery gets the first answer back
 * (`Idempotent-Replayed: true`) without running it. On Express and Fastify.
 */
import { createHmac } from 'node:crypto';
import { Body, Controller, HttpCode, Post, Redirect, Res } from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import request from 'supertest';
import { IdempotencyOperations } from '../../lib/phases';
import { IdempotentWebhook } from '../../lib/webhooks';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { CreateTransfer, TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import { TimeoutInterceptor } from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const SECRET = 'whsec_route_styles';
const PROVIDER = 'styles';

/** The provider's event: its id is the key. */
interface StyleEvent {
  id: string;
  amount: number;
}

const webhook = (options: { execution?: { transactional?: boolean } } = {}) =>
  IdempotentWebhook({
    provider: PROVIDER,
    signature: { scheme: 'stripe' },
    secrets: [SECRET],
    ...options,
  });

/** Counts the run under `<style>:<event id>` and answers with it. */
function processed(probe: Probe, style: string, event: StyleEvent) {
  probe.count(`${style}:${event.id}`);
  return { processed: event.id, style, run: probe.ran(`${style}:${event.id}`) };
}

/** A base class whose webhook handler its subclasses inherit (the decorator is on the base). */
abstract class WebhookBase {
  constructor(protected readonly probe: Probe) {}

  @Post()
  @HttpCode(200)
  @webhook({ execution: { transactional: true } })
  receive(@Body() event: StyleEvent) {
    return processed(this.probe, 'inherited', event);
  }
}

@Controller('wh-inherited')
class InheritedWebhookController extends WebhookBase {
  constructor(probe: Probe) {
    super(probe);
  }
}

/** A mixin adding the webhook handler to any class. */
function WithWebhook<TBase extends abstract new (...args: any[]) => object>(Base: TBase) {
  abstract class Mixed extends Base {
    protected abstract readonly probe: Probe;

    @Post()
    @HttpCode(200)
    @webhook()
    receive(@Body() event: StyleEvent) {
      return processed(this.probe, 'mixin', event);
    }
  }
  return Mixed;
}

@Controller('wh-mixin')
class MixinWebhookController extends WithWebhook(class {}) {
  constructor(protected readonly probe: Probe) {
    super();
  }
}

@Controller('wh-styled')
class StyledWebhookController {
  constructor(
    private readonly probe: Probe,
    private readonly operations: IdempotencyOperations,
  ) {}

  /** `@Res()`: the handler acknowledges the delivery itself. */
  @Post('res')
  @webhook()
  async withRes(@Body() event: StyleEvent, @Res() res: any): Promise<void> {
    const body = processed(this.probe, 'res', event);
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (typeof res.json === 'function') res.status(202).json(body);
    else res.status(202).send(body);
  }

  /** `@Redirect()`: a provider that follows nothing still gets a stored 3xx back. */
  @Post('redirect')
  @webhook()
  @Redirect('/received', 303)
  withRedirect(@Body() event: StyleEvent): void {
    processed(this.probe, 'redirect', event);
  }

  /** An operation in phases run for the event: its last step's answer is the stored one. */
  @Post('transfer')
  @webhook()
  transfer(@Body() event: StyleEvent): Promise<unknown> {
    this.probe.count(`transfer:${event.id}`);
    return this.operations.run(CreateTransfer, { amount: event.amount, to: 'acct_b' });
  }

  /** Waits on the gate named by the event id: longer than the global timeout. */
  @Post('slow')
  @HttpCode(200)
  @webhook()
  async slow(@Body() event: StyleEvent): Promise<unknown> {
    const body = processed(this.probe, 'slow', event);
    await this.probe.gate(`slow:${event.id}`);
    return body;
  }
}

const CONTROLLERS: Type[] = [
  InheritedWebhookController,
  MixinWebhookController,
  StyledWebhookController,
];

/** Stripe-Signature for `body`, signed now. */
function signed(body: string): Record<string, string> {
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac('sha256', SECRET).update(`${t}.${body}`).digest('hex');
  return { 'Stripe-Signature': `t=${t},v1=${v1}`, 'Content-Type': 'application/json' };
}

function deliver(t: TestApp, path: string, event: StyleEvent) {
  const body = JSON.stringify(event);
  return request(t.server).post(path).set(signed(body)).send(body);
}

describe.each(ADAPTERS)('@IdempotentWebhook() across route styles (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  let n = 0;
  const newId = () => `evt_styles_${adapter}_${++n}_${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      ...TRANSFERS,
      rawBody: true,
      controllers: [...TRANSFERS.controllers, ...CONTROLLERS],
      phases: { completer: false, jobs: false },
    });
    hooks = t.app.get(TransferHooks);
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  /** Delivers `event` three times: the first answer, then two replays of it. */
  async function deliverThrice(path: string, event: StyleEvent) {
    const first = await deliver(t, path, event);
    const replays = [await deliver(t, path, event), await deliver(t, path, event)];
    for (const replay of replays) {
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect({ status: replay.status, body: replay.text }).toEqual({
        status: first.status,
        body: first.text,
      });
    }
    return first;
  }

  it.each([
    ['/wh-inherited', 'inherited', 'an inherited handler (transactional)'],
    ['/wh-mixin', 'mixin', 'a mixin handler'],
  ])('%s (%s, %s): runs once, acknowledges every redelivery', async (path, style) => {
    const id = newId();
    const first = await deliverThrice(path, { id, amount: 1 });
    expect({ status: first.status, body: first.body }).toEqual({
      status: 200,
      body: { processed: id, style, run: 1 },
    });
    expect(t.probe.ran(`${style}:${id}`)).toBe(1);
  });

  it('@Res(): the handler’s own 202 is stored and replayed; it ran once', async () => {
    const id = newId();
    const first = await deliverThrice('/wh-styled/res', { id, amount: 2 });
    expect({ status: first.status, body: first.body }).toEqual({
      status: 202,
      body: { processed: id, style: 'res', run: 1 },
    });
    expect(t.probe.ran(`res:${id}`)).toBe(1);
  });

  it('@Redirect(): the 303 and its Location are stored and replayed; it ran once', async () => {
    const id = newId();
    const first = await deliverThrice('/wh-styled/redirect', { id, amount: 3 });
    expect(first.status).toBe(303);
    expect(first.headers.location).toBe('/received');
    const replay = await deliver(t, '/wh-styled/redirect', { id, amount: 3 });
    expect(replay.headers.location).toBe('/received');
    expect(t.probe.ran(`redirect:${id}`)).toBe(1);
  });

  it('an operation in phases: each step ran once, and a redelivery gets its last step’s answer', async () => {
    const id = newId();
    const first = await deliverThrice('/wh-styled/transfer', { id, amount: 4 });
    expect(first.status).toBe(201);
    expect(first.headers.location).toMatch(/^\/transfers\/\d+$/);
    expect(t.probe.ran(`transfer:${id}`)).toBe(1);
    expect(['reserved', 'sent', 'settled'].map((step) => hooks.ran(id, step))).toEqual([1, 1, 1]);
  });
});

describe.each(ADAPTERS)(
  '@IdempotentWebhook() under a global TimeoutInterceptor (%s)',
  (adapter) => {
    let db: TestDatabase;
    let t: TestApp;
    let n = 0;
    const newId = () => `evt_timeout_${adapter}_${++n}_${Date.now()}`;

    beforeAll(async () => {
      db = await createTestDatabase();
      t = await createTestApp(adapter, db, {
        rawBody: true,
        controllers: [StyledWebhookController],
        providers: [
          { provide: IdempotencyOperations, useValue: {} },
          { provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor },
        ],
      });
    });

    afterAll(async () => {
      await t?.close();
      await db?.drop();
    });

    it('408 to the first delivery, 409 to one while the handler runs, then the replay of its 200', async () => {
      const id = newId();
      const event = { id, amount: 5 };
      const first = await deliver(t, '/wh-styled/slow', event);
      expect(first.status).toBe(408);
      const during = await deliver(t, '/wh-styled/slow', event);
      expect(during.status).toBe(409);
      expect(t.probe.ran(`slow:${id}`)).toBe(1);

      t.probe.open(`slow:${id}`);
      await waitFor(async () => {
        const [row] = await db.query<{ status: string }>(
          'SELECT status FROM idempotency_records WHERE scope = $1 AND idempotency_key = $2',
          [`webhook:${PROVIDER}`, id],
        );
        return row?.status === 'completed';
      }, 3000);
      const replay = await deliver(t, '/wh-styled/slow', event);
      expect({ status: replay.status, replayed: replay.headers['idempotent-replayed'] }).toEqual({
        status: 200,
        replayed: 'true',
      });
      expect(replay.body).toEqual({ processed: id, style: 'slow', run: 1 });
      expect(t.probe.ran(`slow:${id}`)).toBe(1);
    });
  },
);
