import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import type * as OpenTelemetry from '@opentelemetry/api';
import { loadOptionalPeer } from '../utils/load-optional-peer';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { IdempotencyEvent } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';

type Api = typeof OpenTelemetry;
type Attributes = OpenTelemetry.Attributes;

/** What a claim came to, for the claim latency histogram. */
export type ClaimOutcome =
  'claimed' | 'completed' | 'in_flight' | 'mismatch' | 'abandoned' | 'error';

/** The meter's name (the instrumentation scope). */
export const IDEMPOTENCY_METER_NAME = 'nest-idempotency';

const DURATION_BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
/** Waits last up to `wait.maxSeconds` (at most 300 s); a refused one lasts 0. */
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/**
 * OpenTelemetry metrics of the library through `@opentelemetry/api`, an optional peer loaded
 * here rather than imported (see `PeriodicTask` for why `require`, then `import()`). Without
 * it, or with `metrics: false`, every method does nothing. Counters and the wait duration come
 * from `IdempotencyEvents`; the claim and completion latencies are reported by the interceptor
 * and the execution.
 * Attributes hold the route and outcome, never the key or the scope.
 *
 * The instruments are made from the global MeterProvider in force at the time of a recording,
 * so an SDK registered after the application started is picked up. Internal.
 */
@Injectable()
export class IdempotencyMetrics implements OnModuleInit, OnModuleDestroy {
  private api?: Api;
  private instruments?: Instruments;
  private unsubscribe?: () => void;

  constructor(
    private readonly events: IdempotencyEvents,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /** Loads `@opentelemetry/api` when metrics are on, and listens to the events. */
  async onModuleInit(): Promise<void> {
    if (!this.options.metrics) return;
    // Installed but broken: metrics are off.
    this.api = await loadOptionalPeer<Api>('@opentelemetry/api').catch(() => undefined);
    if (this.api) this.unsubscribe = this.events.subscribe((event) => this.onEvent(event));
  }

  /** Stops listening. */
  onModuleDestroy(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /**
   * Records how long a claim took.
   * @param route - `METHOD /pattern` (see `routeLabelOf`)
   * @param seconds - from sending the claim to its answer
   */
  claimed(route: string, seconds: number, outcome: ClaimOutcome): void {
    // Optional chaining skips the attributes too while nothing records.
    this.meters()?.claimDuration.record(seconds, {
      ...routeAttributes(route),
      'idempotency.outcome': outcome,
    });
  }

  /**
   * Records how long storing a response took (the completion, with its commit when the route
   * is transactional).
   */
  completed(route: string, seconds: number, stored: boolean): void {
    this.meters()?.completionDuration.record(seconds, {
      ...routeAttributes(route),
      'idempotency.stored': stored,
    });
  }

  private onEvent(event: IdempotencyEvent): void {
    const meters = this.meters();
    if (!meters) return;
    if (event.type === 'purged') meters.purged.add(event.count);
    else if (event.type === 'waited') {
      meters.waitDuration.record(event.waitedMs / 1000, {
        ...routeAttributes(event.route),
        'idempotency.wait.outcome': event.outcome,
      });
    } else if (event.type in COUNTED) {
      const type = event.type as CountedType;
      meters.counters[type].add(1, {
        ...routeAttributes((event as { route?: string }).route),
        ...(COUNTED[type] as (counted: IdempotencyEvent) => Attributes)(event),
      });
    }
  }

  /** The instruments of the current global MeterProvider, made on first use. */
  private meters(): Instruments | undefined {
    const api = this.api;
    if (!api) return undefined;
    const provider = api.metrics.getMeterProvider();
    if (this.instruments?.provider !== provider) this.instruments = makeInstruments(api, provider);
    return this.instruments.recording ? this.instruments : undefined;
  }
}

type EventOf<T extends IdempotencyEvent['type']> = Extract<IdempotencyEvent, { type: T }>;
type CountedType = 'executed' | 'replayed' | 'rejected' | 'released' | 'lock_lost' | 'store_error';

const statusClass = (status: number) => `${Math.floor(status / 100)}xx`;

/** The events each counted by one: the attributes of each (its route's besides). */
const COUNTED: { [T in CountedType]: (event: EventOf<T>) => Attributes } = {
  executed: (event) => ({
    'http.response.status_class': statusClass(event.status),
    'idempotency.stored': event.stored,
  }),
  replayed: (event) => ({ 'http.response.status_class': statusClass(event.status) }),
  rejected: (event) => ({
    'idempotency.code': event.code,
    'http.response.status_code': event.status,
  }),
  released: (event) => ({ 'idempotency.reason': event.reason }),
  lock_lost: (event) => ({ 'idempotency.during': event.during }),
  store_error: (event) => ({ 'idempotency.operation': event.operation }),
};

/** The instruments, made from one MeterProvider. */
type Instruments = ReturnType<typeof makeInstruments>;

/** Every instrument of the library, made from `provider`. */
function makeInstruments(api: Api, provider: OpenTelemetry.MeterProvider) {
  const meter = provider.getMeter(IDEMPOTENCY_METER_NAME);
  const counter = (name: string, description: string, unit = '{request}') =>
    meter.createCounter(name, { description, unit });
  const duration = (name: string, description: string, buckets = DURATION_BUCKETS) =>
    meter.createHistogram(name, {
      description,
      unit: 's',
      advice: { explicitBucketBoundaries: buckets },
    });
  const executed = counter(
    'idempotency.executed',
    'Requests whose handler ran, by status class and whether the response was stored',
  );
  return {
    provider,
    // No SDK registered: the API hands out its shared no-op instruments, and the request path
    // skips building attributes for them until a real provider is set.
    recording: executed !== api.createNoopMeter().createCounter('idempotency.executed'),
    counters: {
      executed,
      replayed: counter('idempotency.replayed', 'Stored responses replayed'),
      rejected: counter('idempotency.rejected', 'Requests answered with an idempotency error'),
      released: counter('idempotency.released', 'Keys given back without a stored response'),
      lock_lost: counter('idempotency.lock_lost', 'Leases found taken over by another request'),
      store_error: counter('idempotency.store_errors', 'Store calls that failed', '{error}'),
    } satisfies Record<CountedType, OpenTelemetry.Counter>,
    purged: counter('idempotency.purged', 'Expired records deleted by the purge', '{record}'),
    claimDuration: duration('idempotency.claim.duration', 'Time to claim a key'),
    completionDuration: duration(
      'idempotency.completion.duration',
      'Time to store a response (complete, and commit on transactional routes)',
    ),
    waitDuration: duration(
      'idempotency.wait.duration',
      'Time a duplicate waited for the request in flight with its key, by how the wait ended',
      WAIT_BUCKETS,
    ),
  };
}

/** `http.request.method` and `http.route` of each route label seen, computed once per label. */
const routeAttributeCache = new Map<string, Attributes>();

function routeAttributes(route: string | undefined): Attributes {
  if (!route) return {};
  let attributes = routeAttributeCache.get(route);
  if (!attributes) {
    const space = route.indexOf(' ');
    attributes =
      space < 0
        ? { 'http.route': route }
        : { 'http.request.method': route.slice(0, space), 'http.route': route.slice(space + 1) };
    // Labels are route patterns (bounded by the application's routes), never URLs.
    routeAttributeCache.set(route, attributes);
  }
  return attributes;
}
