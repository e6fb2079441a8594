/**
 * OpenTelemetry metrics (README "Health and metrics"): with an SDK MeterProvider registered
 * globally, real requests on Express and Fastify are counted per outcome and their claim and
 * completion latencies recorded, with the route pattern and method as attributes and never the
 * key or the scope; `metrics: false` records nothing.
 */
import { metrics } from '@opentelemetry/api';
import type { Attributes } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { DataPoint, Histogram } from '@opentelemetry/sdk-metrics';
import request from 'supertest';
import { IdempotencyEvents, IdempotencyPurgeService, resolveIdempotencyOptions } from '../../lib';
import { IDEMPOTENCY_METER_NAME } from '../../lib/metrics/idempotency-metrics';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

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

describe.each(ADAPTERS)('OpenTelemetry metrics on %s', (adapter) => {
  let db: TestDatabase;
  let app: TestApp;
  let provider: MeterProvider;
  let reader: TestReader;
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
    app = await createTestApp(adapter, db);
  });

  afterAll(async () => {
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

  it('counts lock losses, store errors and purged records', async () => {
    const events = app.app.get(IdempotencyEvents);
    events.emit({
      type: 'lock_lost',
      scope: SCOPE,
      key: 'k',
      during: 'renew',
      route: 'POST /orders',
    });
    events.emit({ type: 'store_error', operation: 'purge', error: new Error('down') });
    const key = newKey();
    await post('/orders', key).expect(201);
    await db.query(`UPDATE idempotency_records SET expires_at = now() - interval '1 minute'`);
    const purged = await app.app.get(IdempotencyPurgeService).purgeExpired();
    expect(purged).toBeGreaterThan(0);

    const got = await collect(reader);
    expect(
      count(got.get('idempotency.lock_lost'), {
        'http.route': '/orders',
        'idempotency.during': 'renew',
      }),
    ).toBe(1);
    expect(count(got.get('idempotency.store_errors'), { 'idempotency.operation': 'purge' })).toBe(
      1,
    );
    expect(count(got.get('idempotency.purged'), {})).toBe(purged);
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
