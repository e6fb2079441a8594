/**
 * `@IdempotentWebhook()` on PostgreSQL, on Express and Fastify: a delivery whose signature
 * verifies (Stripe's scheme, Standard Webhooks, GitHub's HMAC header; any configured secret)
 * runs the handler once per event id; every duplicate, sequential or concurrent, ends in a 2xx
 * without running it again (a concurrent one first gets 409, as a provider's retry would); a
 * failed run gives the event back to the provider's retry; a delivery that does not verify (a
 * tampered body, another secret, a stale timestamp on the injected clock, no header, no raw
 * body) gets 400 problem+json, runs nothing and stores nothing. The event id comes from what
 * the signature covers (a GitHub delivery replayed under a fresh X-GitHub-Delivery is a
 * duplicate), and no HTTP route's scope can name a webhook's record.
 */
import { createHash, createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { Idempotent } from '../../lib';
import type { LoggerService } from '@nestjs/common';
import request from 'supertest';
import { IDEMPOTENCY_WEBHOOK_CLOCK, IdempotentWebhook } from '../../lib/webhooks';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const STRIPE_OLD = 'whsec_stripe_old';
const STRIPE_NEW = 'whsec_stripe_new';
/** A Standard Webhooks secret: whsec_ + base64 of the key bytes. */
const STANDARD_KEY = Buffer.from('a standard webhooks signing key!');
const STANDARD_SECRET = `whsec_${STANDARD_KEY.toString('base64')}`;
const GITHUB_SECRET = "It's a Secret to Everybody";

/** Read by the Standard Webhooks route's secrets factory, as a ConfigService would be. */
class WebhookConfig {
  secrets = [STANDARD_SECRET];
}

/** The injected clock every signature tolerance is measured against. */
const clock = { now: Date.parse('2026-03-01T12:00:00Z') };
const nowSeconds = () => Math.floor(clock.now / 1000);

interface TestEvent {
  id?: string;
  /** Fail the first run with a 500. */
  failFirst?: boolean;
  /** Hold the run until the test opens the gate named by the event id. */
  gate?: boolean;
  pendingWebhooks?: number;
}

@Controller('webhooks')
class WebhooksController {
  constructor(private readonly probe: Probe) {}

  private async process(name: string, event: TestEvent) {
    this.probe.count(name);
    if (event.gate) await this.probe.gate(name);
    if (event.failFirst && this.probe.ran(name) === 1) throw new Error('processing failed');
    return { processed: name, run: this.probe.ran(name) };
  }

  @Post('stripe')
  @HttpCode(200)
  @IdempotentWebhook({
    provider: 'stripe',
    signature: { scheme: 'stripe' },
    secrets: [STRIPE_NEW, STRIPE_OLD],
  })
  stripe(@Body() event: TestEvent) {
    return this.process(`stripe:${event.id}`, event);
  }

  @Post('standard')
  @HttpCode(200)
  @IdempotentWebhook({
    provider: 'acme',
    signature: { scheme: 'standard-webhooks' },
    secrets: { inject: [WebhookConfig], useFactory: (config: WebhookConfig) => config.secrets },
  })
  standard(@Body() event: TestEvent & { message?: string }) {
    return this.process(`acme:${event.message}`, event);
  }

  @Post('github')
  @HttpCode(200)
  @IdempotentWebhook({
    provider: 'github',
    signature: { scheme: 'hmac' },
    secrets: () => GITHUB_SECRET,
  })
  github(@Body() event: TestEvent & { delivery?: string }) {
    return this.process(`github:${event.delivery}`, event);
  }

  @Post('github-by-delivery')
  @HttpCode(200)
  @IdempotentWebhook({
    provider: 'github-by-delivery',
    signature: { scheme: 'hmac' },
    secrets: () => GITHUB_SECRET,
    unsignedKeyHeader: 'X-GitHub-Delivery',
  })
  githubByDelivery(@Body() event: TestEvent & { delivery?: string }) {
    return this.process(`github-by-delivery:${event.delivery}`, event);
  }
}

/** An HTTP route whose scope is whatever its caller sends in X-Tenant. */
@Controller('tenant-orders')
class TenantOrdersController {
  constructor(private readonly probe: Probe) {}

  @Post()
  @Idempotent({ request: { scope: (request: any) => request.headers['x-tenant'] } })
  create(@Body() body: { note: string }) {
    this.probe.count(`order:${body.note}`);
    return { created: body.note };
  }
}

/** The statement docs/webhooks.md gives to remove a caller's record written before the upgrade. */
const CLEANUP_SQL = /```sql\n([^`]*DELETE FROM idempotency_records[^`]*)```/.exec(
  readFileSync(join(__dirname, '../../docs/webhooks.md'), 'utf8'),
)![1];

/** Where the records of a caller whose scope is webhook:stripe are stored. */
const HASHED_STRIPE = `sha256:${createHash('sha256').update('webhook:stripe').digest('hex')}`;

/** The key of an HMAC-signed delivery: the SHA-256 of its signed body. */
const bodyKey = (body: string) => `sha256:${createHash('sha256').update(body).digest('hex')}`;

const hmac = (secret: string | Buffer, content: string) =>
  createHmac('sha256', secret).update(content);

/** Stripe-Signature for a body, signed now (the injected clock) with a secret. */
function stripeSigned(body: string, secret = STRIPE_NEW, t = nowSeconds()) {
  return { 'Stripe-Signature': `t=${t},v1=${hmac(secret, `${t}.${body}`).digest('hex')}` };
}

function standardSigned(id: string, body: string, key = STANDARD_KEY, t = nowSeconds()) {
  const signature = hmac(key, `${id}.${t}.${body}`).digest('base64');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(t),
    'webhook-signature': `v1,${signature}`,
  };
}

function githubSigned(delivery: string, body: string, secret = GITHUB_SECRET) {
  return {
    'X-GitHub-Delivery': delivery,
    'X-Hub-Signature-256': `sha256=${hmac(secret, body).digest('hex')}`,
  };
}

/** Collects what the application logs, to read the fix it gives. */
class CapturingLogger implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  debug(): void {}
  verbose(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

describe.each(ADAPTERS)('@IdempotentWebhook() (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newId = (prefix: string) => `${prefix}_${adapter}_${++n}_${Date.now()}`;

  const deliver = (path: string, body: string, headers: Record<string, string>, app = t) => {
    let req = request(app.server).post(`/webhooks/${path}`).set('Content-Type', 'application/json');
    for (const [name, value] of Object.entries(headers)) req = req.set(name, value);
    return req.send(body);
  };

  async function recordsOf(scope: string, key: string): Promise<number> {
    const [row] = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM idempotency_records WHERE scope = $1 AND idempotency_key = $2',
      [scope, key],
    );
    return row.n;
  }

  function expectRefused(response: request.Response, reason: RegExp): void {
    expect(response.status).toBe(400);
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.headers['cache-control']).toBe('no-store');
    expect(response.body).toMatchObject({
      code: 'idempotency_webhook_signature_invalid',
      status: 400,
      title: 'Webhook signature is invalid',
      detail: expect.stringMatching(reason),
    });
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      rawBody: true,
      controllers: [WebhooksController, TenantOrdersController],
      providers: [WebhookConfig, { provide: IDEMPOTENCY_WEBHOOK_CLOCK, useValue: () => clock.now }],
    });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  describe('each scheme, with a valid signature', () => {
    it('Stripe: runs once, then acknowledges every duplicate with the stored answer', async () => {
      const id = newId('evt');
      const body = JSON.stringify({ id, type: 'charge.refunded' });
      const first = await deliver('stripe', body, stripeSigned(body));
      expect([first.status, first.body]).toEqual([200, { processed: `stripe:${id}`, run: 1 }]);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      for (let i = 0; i < 4; i++) {
        const again = await deliver('stripe', body, stripeSigned(body));
        expect([again.status, again.body]).toEqual([200, first.body]);
        expect(again.headers['idempotent-replayed']).toBe('true');
      }
      expect(t.probe.ran(`stripe:${id}`)).toBe(1);
      expect(await recordsOf('webhook:stripe', id)).toBe(1);
    });

    it('Standard Webhooks: the webhook-id is the key; secrets come from a factory', async () => {
      const message = newId('msg');
      const body = JSON.stringify({ message, type: 'invoice.paid' });
      const first = await deliver('standard', body, standardSigned(message, body));
      expect([first.status, first.body]).toEqual([200, { processed: `acme:${message}`, run: 1 }]);
      // A retry later: newly timestamped and signed, same message id.
      clock.now += 30_000;
      const again = await deliver('standard', body, standardSigned(message, body));
      expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
      expect(t.probe.ran(`acme:${message}`)).toBe(1);
      expect(await recordsOf('webhook:acme', message)).toBe(1);
    });

    it('GitHub’s HMAC header: the SHA-256 of the signed body is the key', async () => {
      const delivery = newId('gh');
      const body = JSON.stringify({ delivery, action: 'opened' });
      const first = await deliver('github', body, githubSigned(delivery, body));
      expect([first.status, first.body]).toEqual([
        200,
        { processed: `github:${delivery}`, run: 1 },
      ]);
      const again = await deliver('github', body, githubSigned(delivery, body));
      expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
      expect(t.probe.ran(`github:${delivery}`)).toBe(1);
      expect(await recordsOf('webhook:github', bodyKey(body))).toBe(1);
    });
  });

  describe('identities no caller can forge', () => {
    it('a captured GitHub delivery sent again under a fresh X-GitHub-Delivery runs nothing', async () => {
      const delivery = newId('gh');
      const body = JSON.stringify({ delivery, action: 'created' });
      const first = await deliver('github', body, githubSigned(`${delivery}-a`, body));
      expect([first.status, first.body]).toEqual([
        200,
        { processed: `github:${delivery}`, run: 1 },
      ]);
      // The signature covers the body only: the same bytes under another delivery id.
      const replayed = await deliver('github', body, githubSigned(`${delivery}-b`, body));
      expect([replayed.status, replayed.headers['idempotent-replayed']]).toEqual([200, 'true']);
      expect(t.probe.ran(`github:${delivery}`)).toBe(1);
    });

    it('unsignedKeyHeader: a fresh delivery id runs the same body again (what it allows)', async () => {
      const delivery = newId('gh');
      const body = JSON.stringify({ delivery, action: 'created' });
      const path = 'github-by-delivery';
      expect((await deliver(path, body, githubSigned(`${delivery}-a`, body))).status).toBe(200);
      const again = await deliver(path, body, githubSigned(`${delivery}-a`, body));
      expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
      const fresh = await deliver(path, body, githubSigned(`${delivery}-b`, body));
      expect([fresh.status, fresh.body.run]).toEqual([200, 2]);
      expect(await recordsOf('webhook:github-by-delivery', `${delivery}-b`)).toBe(1);
    });

    it('an HTTP caller whose scope is webhook:stripe cannot take a Stripe event id first', async () => {
      const id = newId('evt');
      const forged = await request(t.server)
        .post('/tenant-orders')
        .set('X-Tenant', 'webhook:stripe')
        .set('Idempotency-Key', id)
        .send({ note: id });
      expect([forged.status, forged.body]).toEqual([201, { created: id }]);
      const body = JSON.stringify({ id, type: 'charge.succeeded' });
      const genuine = await deliver('stripe', body, stripeSigned(body));
      expect([genuine.status, genuine.body]).toEqual([200, { processed: `stripe:${id}`, run: 1 }]);
      expect(t.probe.ran(`stripe:${id}`)).toBe(1);
      expect(await recordsOf('webhook:stripe', id)).toBe(1);
      // The caller's record is its own, under the hash of its scope.
      expect(await recordsOf(HASHED_STRIPE, id)).toBe(1);
    });

    it('the docs’ statement removes what a caller took under webhook:stripe before the upgrade, and only that', async () => {
      const genuine = newId('evt');
      const body = JSON.stringify({ id: genuine });
      expect((await deliver('stripe', body, stripeSigned(body))).status).toBe(200);
      // Before the upgrade the caller's record was stored under webhook:stripe itself.
      const taken = newId('evt');
      await request(t.server)
        .post('/tenant-orders')
        .set('X-Tenant', 'webhook:stripe')
        .set('Idempotency-Key', taken)
        .send({ note: taken })
        .expect(201);
      await db.query(
        "UPDATE idempotency_records SET scope = 'webhook:stripe' WHERE scope = $1 AND idempotency_key = $2",
        [HASHED_STRIPE, taken],
      );
      const event = JSON.stringify({ id: taken });
      expect((await deliver('stripe', event, stripeSigned(event))).status).toBe(422);
      const removed = await db.query(
        `${CLEANUP_SQL.trim().replace(/;$/, '')} RETURNING idempotency_key`,
      );
      expect(removed).toEqual([{ idempotency_key: taken }]);
      expect(await recordsOf('webhook:stripe', genuine)).toBe(1);
      const now = await deliver('stripe', event, stripeSigned(event));
      expect([now.status, now.body]).toEqual([200, { processed: `stripe:${taken}`, run: 1 }]);
    });
  });

  it('accepts the old and the new secret while rotating', async () => {
    for (const secret of [STRIPE_OLD, STRIPE_NEW]) {
      const id = newId('evt');
      const body = JSON.stringify({ id });
      const response = await deliver('stripe', body, stripeSigned(body, secret));
      expect([response.status, response.body.run]).toEqual([200, 1]);
    }
  });

  it('acknowledges a redelivery whose body changed (the event id names the event): no 422', async () => {
    const id = newId('evt');
    const first = JSON.stringify({ id, pendingWebhooks: 2 });
    const later = JSON.stringify({ id, pendingWebhooks: 1 });
    expect((await deliver('stripe', first, stripeSigned(first))).status).toBe(200);
    const again = await deliver('stripe', later, stripeSigned(later));
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(t.probe.ran(`stripe:${id}`)).toBe(1);
  });

  it('concurrent duplicates run the handler once; each gets 200 or 409, and a retry of a 409 gets 200', async () => {
    const id = newId('evt');
    const body = JSON.stringify({ id });
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => deliver('stripe', body, stripeSigned(body))),
    );
    for (const answer of answers) expect([200, 409]).toContain(answer.status);
    expect(
      answers.filter((a) => a.status === 200 && !a.headers['idempotent-replayed']),
    ).toHaveLength(1);
    for (const answer of answers.filter((a) => a.status === 409)) {
      expect(answer.body.code).toBe('idempotency_key_in_use');
      const retry = await deliver('stripe', body, stripeSigned(body));
      expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([200, 'true']);
    }
    expect(t.probe.ran(`stripe:${id}`)).toBe(1);
  });

  it('a delivery while the first still runs gets 409 with Retry-After, then the replay', async () => {
    const id = newId('evt');
    const body = JSON.stringify({ id, gate: true });
    const first = deliver('stripe', body, stripeSigned(body)).then((response) => response);
    await waitFor(async () => t.probe.ran(`stripe:${id}`) === 1);
    const during = await deliver('stripe', body, stripeSigned(body));
    expect([during.status, during.body.code]).toEqual([409, 'idempotency_key_in_use']);
    expect(during.headers['retry-after']).toBe('1');
    // Worded for an event: the provider sent no Idempotency-Key header.
    expect(during.body.detail).toBe(
      'A webhook event with the key in its event id is still being processed. Retry after it finishes.',
    );
    t.probe.open(`stripe:${id}`);
    expect((await first).status).toBe(200);
    const after = await deliver('stripe', body, stripeSigned(body));
    expect([after.status, after.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(t.probe.ran(`stripe:${id}`)).toBe(1);
  });

  it('a failed run gives the event back: the next delivery runs it and is stored', async () => {
    const id = newId('evt');
    const body = JSON.stringify({ id, failFirst: true });
    const failed = await deliver('stripe', body, stripeSigned(body));
    expect(failed.status).toBe(500);
    expect(await recordsOf('webhook:stripe', id)).toBe(1); // released, not completed
    const retried = await deliver('stripe', body, stripeSigned(body));
    expect([retried.status, retried.body]).toEqual([200, { processed: `stripe:${id}`, run: 2 }]);
    const again = await deliver('stripe', body, stripeSigned(body));
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(t.probe.ran(`stripe:${id}`)).toBe(2);
  });

  describe('a delivery that does not verify: 400, nothing run, nothing stored', () => {
    async function expectNothing(scope: string, key: string, probe: string) {
      expect(t.probe.ran(probe)).toBe(0);
      expect(await recordsOf(scope, key)).toBe(0);
    }

    it('a tampered body', async () => {
      const id = newId('evt');
      const body = JSON.stringify({ id, amount: 100 });
      const tampered = body.replace('100', '900');
      expectRefused(await deliver('stripe', tampered, stripeSigned(body)), /no signature/);
      await expectNothing('webhook:stripe', id, `stripe:${id}`);
    });

    it('a secret that is not configured', async () => {
      const id = newId('evt');
      const body = JSON.stringify({ id });
      expectRefused(
        await deliver('stripe', body, stripeSigned(body, 'whsec_someone_else')),
        /no signature/,
      );
      const message = newId('msg');
      const other = Buffer.from('another key entirely, 32 bytes!!');
      expectRefused(
        await deliver('standard', body, standardSigned(message, body, other)),
        /no signature/,
      );
      const delivery = newId('gh');
      expectRefused(
        await deliver('github', body, githubSigned(delivery, body, 'wrong')),
        /no signature/,
      );
      await expectNothing('webhook:stripe', id, `stripe:${id}`);
      await expectNothing('webhook:acme', message, `acme:${message}`);
      await expectNothing('webhook:github', bodyKey(body), `github:${delivery}`);
    });

    it('a stale timestamp, on the injected clock', async () => {
      const id = newId('evt');
      const body = JSON.stringify({ id });
      const signedAt = nowSeconds() - 301;
      expectRefused(
        await deliver('stripe', body, stripeSigned(body, STRIPE_NEW, signedAt)),
        /more than 300 seconds/,
      );
      const message = newId('msg');
      expectRefused(
        await deliver('standard', body, standardSigned(message, body, STANDARD_KEY, signedAt)),
        /more than 300 seconds/,
      );
      await expectNothing('webhook:stripe', id, `stripe:${id}`);
      await expectNothing('webhook:acme', message, `acme:${message}`);
      // Within the tolerance, the same delivery is processed.
      const fresh = await deliver('stripe', body, stripeSigned(body, STRIPE_NEW, signedAt + 2));
      expect(fresh.status).toBe(200);
    });

    it('no signature header', async () => {
      const id = newId('evt');
      const body = JSON.stringify({ id });
      expectRefused(await deliver('stripe', body, {}), /Stripe-Signature header is missing/);
      expectRefused(
        await deliver('github', body, { 'X-GitHub-Delivery': id }),
        /X-Hub-Signature-256 header is missing/,
      );
      await expectNothing('webhook:stripe', id, `stripe:${id}`);
      await expectNothing('webhook:github', bodyKey(body), `github:${id}`);
    });

    it('emits a rejected event with the code', async () => {
      const body = JSON.stringify({ id: newId('evt') });
      t.events.length = 0;
      await deliver('stripe', body, {});
      expect(t.events).toContainEqual({
        type: 'rejected',
        code: 'idempotency_webhook_signature_invalid',
        status: 400,
        route: 'POST /webhooks/stripe',
      });
    });
  });

  it('a verified event without an id is refused with 400, and nothing runs', async () => {
    const body = JSON.stringify({ type: 'charge.refunded' });
    const response = await deliver('stripe', body, stripeSigned(body));
    expect(response.status).toBe(400);
    expect(response.body).toMatchObject({
      code: 'idempotency_key_missing',
      title: 'Webhook event id is missing',
    });
    expect(t.probe.ran('stripe:undefined')).toBe(0);
  });

  it('without rawBody: true, every delivery is refused with 400 and the fix is logged once', async () => {
    const logger = new CapturingLogger();
    const bare = await createTestApp(adapter, db, {
      controllers: [WebhooksController],
      providers: [WebhookConfig],
      logger,
    });
    try {
      const id = newId('evt');
      const body = JSON.stringify({ id });
      const first = await deliver('stripe', body, stripeSigned(body), bare);
      expectRefused(first, /did not keep its raw body/);
      expectRefused(await deliver('stripe', body, stripeSigned(body), bare), /raw body/);
      const fixes = logger.errors.filter((e) => e.includes('rawBody: true'));
      expect(fixes).toEqual([expect.stringContaining('POST /webhooks/stripe')]);
      expect(bare.probe.ran(`stripe:${id}`)).toBe(0);
      expect(await recordsOf('webhook:stripe', id)).toBe(0);
    } finally {
      await bare.close();
    }
  });
});
