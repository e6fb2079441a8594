/**
 * MemoryIdempotencyStore passes the shared store conformance suite on an injected clock (no
 * sleeps), and refuses to be constructed when NODE_ENV=production.
 */
import { IdempotencyConfigurationError, MemoryIdempotencyStore } from '../../lib';
import { LocalFirstIdempotencyStore } from '../../lib/storage/local-first-idempotency.store';
import { describeIdempotencyStoreConformance } from '../../lib/testing';

describeIdempotencyStoreConformance(
  'MemoryIdempotencyStore',
  async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    return {
      store: new MemoryIdempotencyStore(() => now),
      advance: (seconds: number) => {
        now += seconds * 1000;
      },
      teardown: async () => undefined,
    };
  },
  { describe, it, expect },
);

describeIdempotencyStoreConformance(
  'LocalFirstIdempotencyStore over MemoryIdempotencyStore',
  async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = () => now;
    return {
      store: new LocalFirstIdempotencyStore(
        new MemoryIdempotencyStore(clock),
        { maxEntries: 100, maxBytes: 1 << 20 },
        clock,
      ),
      advance: (seconds: number) => {
        now += seconds * 1000;
      },
      teardown: async () => undefined,
    };
  },
  { describe, it, expect },
);

describe('MemoryIdempotencyStore outside the suite', () => {
  const original = process.env.NODE_ENV;
  afterEach(() => {
    if (original === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = original;
  });

  it('refuses to construct when NODE_ENV=production, naming the fix', () => {
    process.env.NODE_ENV = 'production';
    expect(() => new MemoryIdempotencyStore()).toThrow(IdempotencyConfigurationError);
    expect(() => new MemoryIdempotencyStore()).toThrow(/NODE_ENV=production.*store: "typeorm"/s);
  });

  it('constructs outside production', () => {
    process.env.NODE_ENV = 'development';
    expect(new MemoryIdempotencyStore()).toBeInstanceOf(MemoryIdempotencyStore);
  });
});
