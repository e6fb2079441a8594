/**
 * A run's scope, as an application's code meets it through `IdempotencyContext`, on Express and
 * Fastify: there in the handler after its awaits; each of two requests in flight has its own,
 * and the one that ends first takes nothing from the other; code the handler left running finds
 * none once its request's run ended; and the library's storage is off again (Node's hooks with
 * it) once no idempotent request is in flight.
 */
import { Body, Controller, Post } from '@nestjs/common';
import request from 'supertest';
import { idempotencyRunScopes } from '../../lib/context/idempotency-run-scope';
import { IdempotencyContext, Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** Gates the tests open: a held handler waits on its gate, left-behind code on its own. */
class Gates {
  static held = Promise.resolve();
  static openHeld = () => {};
  /** Resolved when a held handler has started (its run is live). */
  static entered = Promise.resolve();
  static enter = () => {};
  static leftBehind = Promise.resolve();
  static openLeftBehind = () => {};
  /** What the code a handler left running found, once its gate opened. */
  static found: Promise<string | null> = Promise.resolve(null);

  static reset(): void {
    Gates.held = new Promise((resolve) => (Gates.openHeld = resolve));
    Gates.entered = new Promise((resolve) => (Gates.enter = resolve));
    Gates.leftBehind = new Promise((resolve) => (Gates.openLeftBehind = resolve));
  }
}

@Controller('scope')
class ScopeController {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @Post()
  @Idempotent()
  async create(@Body() body: { hold?: boolean; leave?: boolean }) {
    const before = this.idempotency.identity?.key;
    if (body.hold) {
      Gates.enter();
      await Gates.held;
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
    if (body.leave) {
      // Not awaited: runs on after the response, in this handler's async context.
      Gates.found = Gates.leftBehind.then(() => this.idempotency.identity?.key ?? null);
    }
    return { before, after: this.idempotency.identity?.key, live: idempotencyRunScopes.active };
  }
}

describe.each(ADAPTERS)("a run's scope on %s", (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let seq = 0;
  const newKey = () => `scope-${adapter}-${++seq}-${Date.now()}`;
  const post = (key: string, body: object) =>
    request(t.server).post('/scope').set('Idempotency-Key', key).send(body);

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: [ScopeController] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  beforeEach(() => Gates.reset());

  it('reaches the request in the handler after its awaits; none is live once it is answered', async () => {
    const key = newKey();

    const response = await post(key, {});

    expect(response.status).toBe(201);
    expect(response.body).toEqual({ before: key, after: key, live: true });
    expect(idempotencyRunScopes.active).toBe(false);
  });

  it('keeps a request in flight its own run when another one ends first', async () => {
    const [held, quick] = [newKey(), newKey()];

    const heldResponse = post(held, { hold: true }).then((response) => response);
    await Gates.entered;
    const quickResponse = await post(quick, {});
    expect(quickResponse.body).toEqual({ before: quick, after: quick, live: true });
    Gates.openHeld();

    const { status, body } = await heldResponse;
    expect(status).toBe(201);
    expect(body).toEqual({ before: held, after: held, live: true });
    expect(idempotencyRunScopes.active).toBe(false);
    expect(
      t.events.filter((e) => e.type === 'executed' && [held, quick].includes(e.key)),
    ).toHaveLength(2);
  });

  it('gives code the handler left running no run once its request was answered and stored', async () => {
    const key = newKey();
    const response = await post(key, { leave: true });
    expect(response.status).toBe(201);
    const [row] = await db.query<{ status: string }>(
      'SELECT status FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    expect(row.status).toBe('completed');

    Gates.openLeftBehind();

    expect(await Gates.found).toBeNull();
  });
});
