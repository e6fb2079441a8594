/**
 * OpenTelemetry metrics (README "Health and metrics"): with an SDK MeterProvider registered
 * globally, real requests on Express and Fastify are counted per outcome and their claim and
 * completion latencies recorded, with the route pattern and method as attributes and never the
 * key or the scope; `metrics: false` records nothing. Lost leases and store errors come from
 * real failures: a stale owner whose key was taken over after its lease lapsed, a renewal that
 * finds the record taken over, and a claim while the database refuses connections. A duplicate
 * that waits for its key in flight (`wait`) emits one `waited` event and one recording of
 * `idempotency.wait.duration`, by how its wait ended: replayed, claimed after a release, timed
 * out, refused past `maxWaiters`, its client gone.
 */
import { request as httpRequest } from 'node:http';
import { Body, Controller, Post, UseGuards } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import type { Attributes } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { DataPoint, Histogram } from '@opentelemetry/sdk-metrics';
import request from 'supertest';
import { Idempotent, IdempotencyContext, IdempotencyPurgeService } from '../../lib';
import { resolveIdempotencyOptions } from '../../lib/config/idempotency.defaults';
import { IDEMPOTENCY_METER_NAME } from '../../lib/metrics/idempotency-metrics';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { DatabaseOutage } from '../fixtures/database-outage';
import { FakeAuthGuard, OrdersController, Probe } from '../fixtures/orders.controller';
import { WaitingController, waitersOf } from '../fixtures/waiting.controller';
import { leaseLapsed } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

/** A reader the test collects from on demand. */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

interface Point {
  attributes: Attributes;
  value: number | Histogram;
}

/** name → data points of the library's meter, as collected now (cumulative). */
async function collect(reader: TestReader): Promise<Map<string, Point[]>> {
  const { resourceMetrics } = await reader.collect();
  const out = new Map<string, Point[]>();
  for (const scope of resourceMetrics.scopeMetrics) {
    if (scope.scope.name !== IDEMPOTENCY_METER_NAME) continue;
    for (const metric of scope.metrics) {
      const points = (metric.dataPoints as DataPoint<number | Histogram>[]).map((p) => ({
        attributes: p.attributes,
        value: p.value,
      }));
      out.set(metric.descriptor.name, points);
      if (metric.descriptor.name.endsWith('.duration')) {
        expect(metric.dataPointType).toBe(DataPointType.HISTOGRAM);
        expect(metric.descriptor.unit).toBe('s');
      }
    }
  }
  return out;
}

/** The sum of the counter's points whose attributes include `match`. */
function count(points: Point[] | undefined, match: Attributes): number {
  return (points ?? [])
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .reduce((sum, p) => sum + (p.value as number), 0);
}

/** The number of recordings of the histogram whose attributes include `match`. */
function recordings(points: Point[] | undefined, match: Attributes): number {
  return (points ?? [])
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .reduce((sum, p) => sum + (p.value as Histogram).count, 0);
}

const SCOPE = 'tenant-7f3a-secret-scope';

/**
 * Handlers that wait on the probe's gate `<gate>#<attempt>`: `lapsing` takes a 1 s lease and
 * stops renewing after 0.3 s, before its first renewal (due at 0.33 s) is ever sent, so the lease
 * lapses 1 s after the claim while the handler waits, and no late renewal can revive it on a
 * loaded host; `held` takes a 0.3 s lease and renews it every 0.1 s for as long as the handler
 * runs.
 */
@Controller('leases')
@UseGuards(FakeAuthGuard)
class LeasesController {
  constructor(
    private readonly probe: Probe,
    private readonly idempotency: IdempotencyContext,
  ) {}

  @Post('lapsing')
  @Idempotent({ execution: { lockTimeoutSeconds: 1, maxLockHoldSeconds: 0.3 } })
  lapsing(@Body() body: { gate: string }) {
    return this.wait('lapsing', body.gate);
  }

  @Post('held')
  @Idempotent({ execution: { lockTimeoutSeconds: 0.3 } })
  held(@Body() body: { gate: string }) {
    return this.wait('held', body.gate);
  }

  private async wait(name: string, gate: string) {
    this.probe.count(name);
    const attempt = this.idempotency.identity?.attempt;
    await this.probe.gate(`${gate}#${attempt}`);
    return { attempt };
  }
}

describe.each(ADAPTERS)('OpenTelemetry metrics on %s', (adapter) => {
  let db: TestDatabase;
  let app: TestApp;
  let provider: MeterProvider;
  let reader: TestReader;
  let outage: DatabaseOutage;
  const keys: string[] = [];
  const newKey = () => {
    const key = `metrics-${adapter}-${keys.length}-${Date.now()}`;
    keys.push(key);
    return key;
  };
  const post = (path: string, key?: string, body: object = { amount: 5 }) => {
    const req = request(app.server).post(path).set('x-user', SCOPE);
    return key === undefined ? req.send(body) : req.set('Idempotency-Key', key).send(body);
  };

  beforeAll(async () => {
    reader = new TestReader();
    provider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(provider);
    db = await createTestDatabase();
    outage = await DatabaseOutage.of(db);
    app = await createTestApp(adapter, db, { controllers: [OrdersController, LeasesController] });
  });

  afterAll(async () => {
    await outage?.end().catch(() => undefined);
    await app?.close();
    await db?.drop();
    await provider?.shutdown();
    metrics.disable();
  });

  it('counts each outcome and times claims and completions, by route pattern and method', async () => {
    const key = newKey();
    await post('/orders', key).expect(201);
    await post('/orders', key).expect(201); // replayed
    await post('/orders', key, { amount: 6 }).expect(422); // same key, other body
    await post('/orders').expect(400); // no key: refused by the guard
    await post('/orders/decline', newKey()).expect(402); // final 4xx: stored
    await post('/orders/unavailable', newKey()).expect(503); // not final: released
    await request(app.server).put('/orders/42').set('Idempotency-Key', newKey()).expect(200);

    const got = await collect(reader);
    const orders = { 'http.route': '/orders', 'http.request.method': 'POST' };
    expect(
      count(got.get('idempotency.executed'), {
        ...orders,
        'http.response.status_class': '2xx',
        'idempotency.stored': true,
      }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.executed'), {
        'http.route': '/orders/decline',
        'http.response.status_class': '4xx',
      }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.executed'), {
        'http.route': '/orders/unavailable',
        'http.response.status_class': '5xx',
        'idempotency.stored': false,
      }),
    ).toBe(1);
    // The pattern, not the URL.
    expect(
      count(got.get('idempotency.executed'), {
        'http.route': '/orders/:id',
        'http.request.method': 'PUT',
      }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.replayed'), { ...orders, 'http.response.status_class': '2xx' }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.rejected'), {
        ...orders,
        'idempotency.code': 'idempotency_key_reused',
        'http.response.status_code': 422,
      }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.rejected'), {
        ...orders,
        'idempotency.code': 'idempotency_key_missing',
        'http.response.status_code': 400,
      }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.released'), {
        'http.route': '/orders/unavailable',
        'idempotency.reason': 'not_final',
      }),
    ).toBe(1);

    // Claims: the first POST /orders claimed, the second found it completed, the third mismatched.
    const claims = got.get('idempotency.claim.duration');
    expect(recordings(claims, { ...orders, 'idempotency.outcome': 'claimed' })).toBe(1);
    expect(recordings(claims, { ...orders, 'idempotency.outcome': 'completed' })).toBe(1);
    expect(recordings(claims, { ...orders, 'idempotency.outcome': 'mismatch' })).toBe(1);
    expect(recordings(claims, {})).toBe(6);
    const completions = got.get('idempotency.completion.duration');
    expect(recordings(completions, { ...orders, 'idempotency.stored': true })).toBe(1);
    expect(recordings(completions, {})).toBe(3); // /orders, decline, PUT (unavailable is released)
    for (const point of [...claims!, ...completions!]) {
      const h = point.value as Histogram;
      expect(h.sum ?? 0).toBeGreaterThan(0);
      expect((h.sum ?? 0) / h.count).toBeLessThan(5); // seconds, not milliseconds
    }
  });

  it('counts a lease lost to a takeover when the stale owner completes', async () => {
    const key = newKey();
    const body = { amount: 5, gate: key };
    const before = app.probe.ran('lapsing');
    // Its heartbeat stops after 0.3 s (maxLockHoldSeconds), before its first renewal, so the
    // lease lapses while it waits, 1 s after the claim.
    const stale = post('/leases/lapsing', key, body).then((r) => r);
    try {
      await waitFor(async () => app.probe.ran('lapsing') === before + 1);
      await waitFor(() => leaseLapsed(db, key));
      // A retry of the same request takes the key over for real (attempt 2)...
      const takeover = post('/leases/lapsing', key, body).then((r) => r);
      await waitFor(async () => app.probe.ran('lapsing') === before + 2);
      // ...and the stale owner finishes first: its completion no longer owns the record.
      app.probe.open(`${key}#1`);
      const late = await stale;
      expect(late.status).toBe(201);
      expect(late.body).toEqual({ attempt: 1 });
      app.probe.open(`${key}#2`);
      const winner = await takeover;
      expect(winner.status).toBe(201);
      expect(winner.body).toEqual({ attempt: 2 });
      const replay = await post('/leases/lapsing', key, body).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual({ attempt: 2 });
    } finally {
      app.probe.open(`${key}#1`);
      app.probe.open(`${key}#2`);
    }

    const got = await collect(reader);
    const lapsing = { 'http.route': '/leases/lapsing', 'http.request.method': 'POST' };
    expect(
      count(got.get('idempotency.lock_lost'), { ...lapsing, 'idempotency.during': 'complete' }),
    ).toBe(1);
    expect(count(got.get('idempotency.lock_lost'), lapsing)).toBe(1);
    // The stale owner's response went to its client unstored; the takeover's was stored.
    expect(
      count(got.get('idempotency.executed'), { ...lapsing, 'idempotency.stored': false }),
    ).toBe(1);
    expect(count(got.get('idempotency.executed'), { ...lapsing, 'idempotency.stored': true })).toBe(
      1,
    );
    const claims = got.get('idempotency.claim.duration');
    expect(recordings(claims, { ...lapsing, 'idempotency.outcome': 'claimed' })).toBe(2);
  });

  it('counts a lease found taken over by a renewal, then by the release', async () => {
    const key = newKey();
    const before = app.probe.ran('held');
    const held = post('/leases/held', key, { amount: 5, gate: key }).then((r) => r);
    try {
      await waitFor(async () => app.probe.ran('held') === before + 1);
      // What a takeover does to the row; the heartbeat (every 0.1 s) renews next and is refused.
      await db.query(
        'UPDATE idempotency_records SET owner_token = gen_random_uuid() WHERE idempotency_key = $1',
        [key],
      );
      await waitFor(async () =>
        app.events.some((e) => e.type === 'lock_lost' && e.key === key && e.during === 'renew'),
      );
      app.probe.fail(`${key}#1`); // its handler then fails: the release finds it taken over too
      expect((await held).status).toBe(500);
    } finally {
      app.probe.open(`${key}#1`);
    }

    const got = await collect(reader);
    const route = { 'http.route': '/leases/held', 'http.request.method': 'POST' };
    expect(
      count(got.get('idempotency.lock_lost'), { ...route, 'idempotency.during': 'renew' }),
    ).toBe(1);
    expect(
      count(got.get('idempotency.lock_lost'), { ...route, 'idempotency.during': 'release' }),
    ).toBe(1);
    // One lost lease, found twice: the counter counts each time an owner finds it.
    expect(count(got.get('idempotency.lock_lost'), route)).toBe(2);
    expect(count(got.get('idempotency.released'), route)).toBe(0);
  });

  it('counts a claim the store could not answer, and answers 503', async () => {
    const key = newKey();
    const before = app.probe.ran('create');
    await outage.begin();
    let refused: request.Response;
    try {
      refused = await post('/orders', key);
    } finally {
      await outage.end();
    }
    expect(refused.status).toBe(503);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.body).toMatchObject({ status: 503, code: 'idempotency_store_unavailable' });
    expect(app.probe.ran('create')).toBe(before);

    const got = await collect(reader);
    const orders = { 'http.route': '/orders', 'http.request.method': 'POST' };
    expect(
      count(got.get('idempotency.store_errors'), { ...orders, 'idempotency.operation': 'claim' }),
    ).toBe(1);
    expect(count(got.get('idempotency.store_errors'), orders)).toBe(1);
    expect(
      count(got.get('idempotency.rejected'), {
        ...orders,
        'idempotency.code': 'idempotency_store_unavailable',
        'http.response.status_code': 503,
      }),
    ).toBe(1);
    const claims = got.get('idempotency.claim.duration');
    expect(recordings(claims, { ...orders, 'idempotency.outcome': 'error' })).toBe(1);

    // The database is back: the same key runs.
    await post('/orders', key).expect(201);
    expect(app.probe.ran('create')).toBe(before + 1);
  });

  it('counts purged records', async () => {
    const key = newKey();
    await post('/orders', key).expect(201);
    await db.query(
      `UPDATE idempotency_records SET expires_at = now() - interval '1 minute', purge_after = now() - interval '1 minute'`,
    );
    const purged = await app.app.get(IdempotencyPurgeService).purgeExpired();
    expect(purged).toBeGreaterThan(0);

    const got = await collect(reader);
    expect(count(got.get('idempotency.purged'), {})).toBe(purged);
  });

  it('counts a purge called by hand that the store could not run, and rethrows', async () => {
    const before = count((await collect(reader)).get('idempotency.store_errors'), {
      'idempotency.operation': 'purge',
    });
    await outage.begin();
    try {
      await expect(app.app.get(IdempotencyPurgeService).purgeExpired()).rejects.toThrow();
    } finally {
      await outage.end();
    }
    expect(app.events).toContainEqual(
      expect.objectContaining({ type: 'store_error', operation: 'purge' }),
    );
    const got = await collect(reader);
    expect(count(got.get('idempotency.store_errors'), { 'idempotency.operation': 'purge' })).toBe(
      before + 1,
    );
  });

  it('no attribute holds a key or the scope', async () => {
    const got = await collect(reader);
    expect(got.size).toBeGreaterThanOrEqual(9);
    for (const points of got.values()) {
      for (const { attributes } of points) {
        for (const [name, value] of Object.entries(attributes)) {
          expect(name).not.toMatch(/key|scope/);
          for (const secret of [SCOPE, ...keys]) expect(String(value)).not.toContain(secret);
        }
      }
    }
  });
});

describe.each(ADAPTERS)('a wait: its event and histogram on %s', (adapter) => {
  const WAIT_SCOPE = 'tenant-wait-9c1e-secret-scope';
  let db: TestDatabase;
  let t: TestApp;
  let provider: MeterProvider;
  let reader: TestReader;
  const keys: string[] = [];
  const newKey = () => {
    const key = `waited-${adapter}-${keys.length}-${Date.now()}`;
    keys.push(key);
    return key;
  };
  const route = { 'http.route': '/waiting', 'http.request.method': 'POST' };

  beforeAll(async () => {
    reader = new TestReader();
    provider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(provider);
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [WaitingController],
      module: { request: { scope: () => WAIT_SCOPE }, wait: { maxWaiters: 1 } },
    });
    await t.app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
    await provider?.shutdown();
    metrics.disable();
  });

  const post = (path: string, key: string, body: object, prefer?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return (prefer ? req.set('Prefer', prefer) : req).send(body);
  };
  /** Starts the first request of `key` on `path`, held on its gate until the test opens it. */
  const startFirst = async (key: string, path = '/waiting', counter = 'waits') => {
    const before = t.probe.ran(counter);
    const first = post(path, key, { gate: key }).then((response) => response);
    await waitFor(async () => t.probe.ran(counter) === before + 1);
    return { first };
  };
  /** Starts a duplicate with `Prefer: wait=5` and waits until it waits. */
  const startWaiter = async (key: string) => {
    const before = waitersOf(t.app);
    const waiter = post('/waiting', key, { gate: key }, 'wait=5').then((response) => response);
    await waitFor(async () => waitersOf(t.app) === before + 1);
    return { waiter };
  };
  const waitedEvents = (key: string) =>
    t.events.filter((e): e is Extract<typeof e, { type: 'waited' }> => {
      return e.type === 'waited' && e.key === key;
    });
  /** The wait histogram's recordings for `outcome` on POST /waiting, and their sum (s). */
  const waits = async (outcome: string) => {
    const points = ((await collect(reader)).get('idempotency.wait.duration') ?? []).filter(
      (p) =>
        p.attributes['idempotency.wait.outcome'] === outcome &&
        Object.entries(route).every(([k, v]) => p.attributes[k] === v),
    );
    const histograms = points.map((p) => p.value as Histogram);
    return {
      count: histograms.reduce((n, h) => n + h.count, 0),
      sum: histograms.reduce((n, h) => n + (h.sum ?? 0), 0),
    };
  };

  it('a duplicate that waits, then gets the replay: one replayed wait, timed', async () => {
    const before = await waits('replayed');
    const key = newKey();
    const { first } = await startFirst(key);
    const { waiter } = await startWaiter(key);
    // The first request holds the key a little longer, so the wait has a length to measure.
    await new Promise((resolve) => setTimeout(resolve, 200));
    t.probe.open(`${key}#1`);
    expect((await first).status).toBe(201);
    const response = await waiter;
    expect(response.status).toBe(201);
    expect(response.headers['idempotent-replayed']).toBe('true');

    const [event, ...more] = waitedEvents(key);
    expect(more).toEqual([]); // the first request, which did not wait, emits none
    expect(event).toEqual({
      type: 'waited',
      scope: WAIT_SCOPE,
      key,
      outcome: 'replayed',
      waitedMs: expect.any(Number),
      route: 'POST /waiting',
    });
    expect(event.waitedMs).toBeGreaterThanOrEqual(150);
    expect(event.waitedMs).toBeLessThan(5000);
    // Before the answer's own event.
    const order = t.events.filter((e) => 'key' in e && e.key === key).map((e) => e.type);
    expect(order.filter((type) => type !== 'executed')).toEqual(['waited', 'replayed']);

    const after = await waits('replayed');
    expect(after.count - before.count).toBe(1);
    expect(after.sum - before.sum).toBeCloseTo(event.waitedMs / 1000, 3);
  });

  it('a wait that runs out: one timed_out wait of about its length, then 409', async () => {
    const before = await waits('timed_out');
    const key = newKey();
    const { first } = await startFirst(key);
    const response = await post('/waiting', key, { gate: key }, 'wait=1');
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('idempotency_key_in_use');
    const events = waitedEvents(key);
    expect(events).toEqual([expect.objectContaining({ outcome: 'timed_out', scope: WAIT_SCOPE })]);
    // The wait is timed from the first claim's answer, its 1 s from before that claim was sent:
    // a loaded host that slows the first claim more than the last look shortens the measure, so
    // the lower bound is half the wait (still not no length, and not seconds counted as ms).
    expect(events[0].waitedMs).toBeGreaterThanOrEqual(500);
    expect(events[0].waitedMs).toBeLessThan(3000);
    const after = await waits('timed_out');
    expect(after.count - before.count).toBe(1);
    expect(after.sum - before.sum).toBeGreaterThanOrEqual(0.5);
    t.probe.open(`${key}#1`);
    expect((await first).status).toBe(201);
  });

  it('past maxWaiters (1 here): one refused wait of no length; the waiting one is replayed', async () => {
    const refusedBefore = await waits('refused');
    const replayedBefore = await waits('replayed');
    const key = newKey();
    const { first } = await startFirst(key);
    const { waiter } = await startWaiter(key);
    const refused = await post('/waiting', key, { gate: key }, 'wait=5');
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('idempotency_key_in_use');
    expect(waitedEvents(key)).toEqual([
      expect.objectContaining({ outcome: 'refused', route: 'POST /waiting' }),
    ]);
    expect(waitedEvents(key)[0].waitedMs).toBeLessThan(500);
    t.probe.open(`${key}#1`);
    await first;
    expect((await waiter).status).toBe(201);
    expect(waitedEvents(key).map((e) => e.outcome)).toEqual(['refused', 'replayed']);

    const refusedAfter = await waits('refused');
    expect(refusedAfter.count - refusedBefore.count).toBe(1);
    expect(refusedAfter.sum - refusedBefore.sum).toBeLessThan(0.5);
    expect((await waits('replayed')).count - replayedBefore.count).toBe(1);
  });

  it('after a release the waiter claims the key and runs the handler: one claimed wait', async () => {
    const before = await waits('claimed');
    const key = newKey();
    const { first } = await startFirst(key);
    const { waiter } = await startWaiter(key);
    t.probe.open(`${key}#2`);
    t.probe.fail(`${key}#1`);
    expect((await first).status).toBe(500);
    const response = await waiter;
    expect(response.status).toBe(201);
    expect(response.body.attempt).toBe(2);
    expect(waitedEvents(key).map((e) => e.outcome)).toEqual(['claimed']);
    expect((await waits('claimed')).count - before.count).toBe(1);
  });

  it('a waiter whose client hangs up: one client_gone wait', async () => {
    const before = await waits('client_gone');
    const key = newKey();
    const { first } = await startFirst(key);
    const payload = JSON.stringify({ gate: key });
    const req = httpRequest({
      host: '127.0.0.1',
      port: t.server.address().port,
      method: 'POST',
      path: '/waiting',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        'idempotency-key': key,
        prefer: 'wait=10',
      },
    });
    req.on('error', () => undefined);
    req.end(payload);
    await waitFor(async () => waitersOf(t.app) === 1);
    req.destroy();
    await waitFor(async () => waitedEvents(key).length === 1, 2000);
    expect(waitedEvents(key).map((e) => e.outcome)).toEqual(['client_gone']);
    expect((await waits('client_gone')).count - before.count).toBe(1);
    t.probe.open(`${key}#1`);
    expect((await first).status).toBe(201);
  });

  it('nothing for a request that did not wait: a route without wait, Prefer: wait=0', async () => {
    const plain = newKey();
    const { first: plainFirst } = await startFirst(plain, '/waiting/no-wait', 'no-wait');
    expect((await post('/waiting/no-wait', plain, { gate: plain }, 'wait=10')).status).toBe(409);
    t.probe.open(`${plain}#1`);
    await plainFirst;
    const key = newKey();
    const { first } = await startFirst(key);
    expect((await post('/waiting', key, { gate: key }, 'wait=0')).status).toBe(409);
    t.probe.open(`${key}#1`);
    await first;
    expect((await post('/waiting', key, { gate: key }, 'wait=5')).status).toBe(201); // completed
    expect([...waitedEvents(plain), ...waitedEvents(key)]).toEqual([]);
    const points = (await collect(reader)).get('idempotency.wait.duration') ?? [];
    expect(points.some((p) => p.attributes['http.route'] === '/waiting/no-wait')).toBe(false);
  });

  it('no attribute of the wait histogram holds a key or the scope', async () => {
    const points = (await collect(reader)).get('idempotency.wait.duration') ?? [];
    expect(points.length).toBeGreaterThanOrEqual(5);
    for (const { attributes } of points) {
      expect(Object.keys(attributes).sort()).toEqual([
        'http.request.method',
        'http.route',
        'idempotency.wait.outcome',
      ]);
      for (const value of Object.values(attributes)) {
        for (const secret of [WAIT_SCOPE, ...keys]) expect(String(value)).not.toContain(secret);
      }
    }
  });
});

describe('metrics: false', () => {
  it('is the only other value', () => {
    expect(resolveIdempotencyOptions({}).metrics).toBe(true);
    expect(() => resolveIdempotencyOptions({ metrics: 'no' as never })).toThrow(/metrics/);
  });

  it('records nothing', async () => {
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(provider);
    const db = await createTestDatabase();
    const app = await createTestApp('express', db, { module: { metrics: false } });
    try {
      await request(app.server)
        .post('/orders')
        .set('Idempotency-Key', `off-${Date.now()}`)
        .send({ amount: 1 })
        .expect(201);
      expect((await collect(reader)).size).toBe(0);
    } finally {
      await app.close();
      await db.drop();
      await provider.shutdown();
      metrics.disable();
    }
  });
});
