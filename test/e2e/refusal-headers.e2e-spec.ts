/**
 * A refusal that replaces a handler's answer carries none of the route's own headers: when a
 * transactional route loses its lease while its handler runs (another instance took the key
 * over), its client gets 409 `idempotency_key_in_use` instead of the 201 the handler returned,
 * and that 409 must not carry the `Location`, `Set-Cookie` or `ETag` the handler set for the
 * 201 (a cookie for an order that was rolled back, a location that does not exist).
 *
 * Two applications share one database, as two instances would: A (0.3 s lease) claims the key
 * and its renewals are held back until B (30 s lease) has taken the key over, as in
 * stale-owner.e2e-spec.ts; then A's handler returns.
 */
import { Body, Controller, Post, Res } from '@nestjs/common';
import request from 'supertest';
import { Idempotent, IdempotencyContext, IdempotencyStore } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { leaseLapsed } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const ROUTE_HEADERS = {
  location: '/accounts/42',
  'set-cookie': 'session=route-cookie; Path=/',
  etag: '"route-etag"',
};

/** A transactional route that sets its own Location, Set-Cookie and ETag, then waits on a gate. */
@Controller('accounts')
class AccountsController {
  constructor(
    private readonly probe: Probe,
    private readonly idempotency: IdempotencyContext,
  ) {}

  @Post()
  @Idempotent({ execution: { transactional: true } })
  async open(@Body() body: { gate: string }, @Res({ passthrough: true }) res: any) {
    this.probe.count('open');
    await this.idempotency.entityManager!.query('SELECT 1');
    for (const [name, value] of Object.entries(ROUTE_HEADERS)) res.header(name, value);
    await this.probe.gate(`${body.gate}#${this.idempotency.identity?.attempt}`);
    return { id: 42 };
  }
}

describe.each(ADAPTERS)('a refusal replacing the answer on %s', (adapter) => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    const controllers = [AccountsController];
    a = await createTestApp(adapter, db, {
      controllers,
      module: { execution: { lockTimeoutSeconds: 0.3, maxLockHoldSeconds: 30 } },
    });
    b = await createTestApp(adapter, db, {
      controllers,
      module: { execution: { lockTimeoutSeconds: 30 } },
    });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it("has none of the route's Location, Set-Cookie and ETag when the lease was lost", async () => {
    const key = `refusal-${adapter}-${Date.now()}`;
    const send = (t: TestApp) =>
      request(t.server)
        .post('/accounts')
        .set('Idempotency-Key', key)
        .send({ gate: key })
        .then((r) => r);
    const attempts = async () =>
      (
        await db.query<{ attempts: number }>(
          'SELECT attempts FROM idempotency_records WHERE idempotency_key = $1',
          [key],
        )
      )[0]?.attempts;
    // A's renewals are held back (a stalled heartbeat) until B has taken the key over.
    const store = a.app.get(IdempotencyStore);
    const renew = store.renew;
    let letThrough!: () => void;
    const held = new Promise<void>((resolve) => (letThrough = resolve));
    store.renew = (ref, seconds) => held.then(() => renew.call(store, ref, seconds));
    try {
      const stale = send(a);
      await waitFor(async () => (await attempts()) === 1 && a.probe.ran('open') === 1);
      await waitFor(() => leaseLapsed(db, key));
      const takeover = send(b);
      await waitFor(async () => (await attempts()) === 2);
      letThrough();

      a.probe.open(`${key}#1`);
      const refused = await stale;

      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('idempotency_key_in_use');
      expect(refused.headers).not.toHaveProperty('location');
      expect(refused.headers).not.toHaveProperty('set-cookie');
      expect(refused.headers).not.toHaveProperty('etag');

      b.probe.open(`${key}#2`);
      const winner = await takeover;
      expect(winner.status).toBe(201);
      expect(winner.headers).toMatchObject({
        ...ROUTE_HEADERS,
        'set-cookie': [ROUTE_HEADERS['set-cookie']],
      });
    } finally {
      letThrough();
      store.renew = renew;
      a.probe.open(`${key}#1`);
      b.probe.open(`${key}#2`);
    }
  });
});
