/**
 * The request path's steps that are not async functions (to spare a promise per request) still
 * fail by rejecting, never by throwing: the claim maps a rejection to its 503 (fail closed, SPEC
 * §9), while a throw would escape that mapping as a bare 500.
 */
import type { ExecutionContext } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { IdempotencyExecutionFactory } from '../../lib/execution/idempotency-execution.factory';
import { LocalFirstIdempotencyStore } from '../../lib/storage/local-first-idempotency.store';
import { MemoryIdempotencyStore } from '../../lib/storage/memory-idempotency.store';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm';
import { TypeOrmStoreTransaction } from '../../lib/storage/typeorm/typeorm-store-transaction';
import type { ResolvedIdempotencyRouteOptions } from '../../lib/interfaces/idempotency-module-options.interface';

const gone = new Error('the DataSource is gone');

/** Calls `call`, and says whether it threw or what its promise settled to. */
async function outcome(call: () => unknown): Promise<string> {
  let pending: Promise<unknown>;
  try {
    // A value returned at once (an execution with nothing to open) counts as resolved.
    pending = Promise.resolve(call());
  } catch (error) {
    return `threw: ${(error as Error).message}`;
  }
  return pending.then(
    () => 'resolved',
    (error: unknown) => `rejected: ${(error as Error).message}`,
  );
}

describe('request path steps reject instead of throwing', () => {
  const store = new TypeOrmIdempotencyStore(() => {
    throw gone;
  }, 'idempotency_records');
  const ref = { scope: '', key: 'k', ownerToken: 'o' };

  it.each([
    [
      'claim',
      () =>
        store.claim({
          scope: '',
          key: 'k',
          fingerprint: 'f'.repeat(64),
          method: 'POST',
          path: '/orders',
          ownerToken: 'o',
          lockTimeoutSeconds: 30,
          ttlSeconds: 60,
        }),
    ],
    [
      'complete',
      () => store.complete(ref, { status: 201, headers: {}, body: Buffer.from('{}') }, 60),
    ],
    ['renew', () => store.renew(ref, 30)],
  ])('the TypeORM store: %s whose DataSource cannot be resolved', async (_name, call) => {
    expect(await outcome(call)).toBe('rejected: the DataSource is gone');
  });

  describe('the local-first store, over a store that throws instead of rejecting', () => {
    const claimOf = (ownerToken: string) => ({
      scope: '',
      key: 'k',
      fingerprint: 'f'.repeat(64),
      method: 'POST',
      path: '/orders',
      ownerToken,
      lockTimeoutSeconds: 30,
      ttlSeconds: 60,
    });
    const response = { status: 201, headers: {}, body: Buffer.from('{}') };
    /** A memory store whose `name` call throws `gone` synchronously, once. */
    function throwingOnce(name: 'claim' | 'complete' | 'release'): MemoryIdempotencyStore {
      const inner = new MemoryIdempotencyStore();
      const real = inner[name].bind(inner) as (...args: unknown[]) => unknown;
      let thrown = false;
      (inner as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
        if (thrown) return real(...args);
        thrown = true;
        throw gone;
      };
      return inner;
    }

    it('claim: rejects, and the key is not left held here', async () => {
      const store = new LocalFirstIdempotencyStore(throwingOnce('claim'), {
        maxEntries: 10,
        maxBytes: 1 << 20,
      });
      expect(await outcome(() => store.claim(claimOf('o1')))).toBe(
        'rejected: the DataSource is gone',
      );
      // Had the failed claim stayed on its way here, this one would wait on it forever.
      await expect(store.claim(claimOf('o2'))).resolves.toMatchObject({ outcome: 'claimed' });
    });

    it.each(['complete', 'release'] as const)(
      '%s: rejects, and this instance no longer answers the key in flight',
      async (name) => {
        const store = new LocalFirstIdempotencyStore(throwingOnce(name), {
          maxEntries: 10,
          maxBytes: 1 << 20,
        });
        const claimed = await store.claim(claimOf('o1'));
        expect(claimed.outcome).toBe('claimed');
        const ref = { scope: '', key: 'k', ownerToken: 'o1' };
        expect(store.capabilities().memory!.answer('', 'k', 'f'.repeat(64))).toMatchObject({
          outcome: 'in_flight',
        });
        const write = () =>
          name === 'complete' ? store.complete(ref, response, 60) : store.release(ref, 'retry');
        expect(await outcome(write)).toBe('rejected: the DataSource is gone');
        // The store decides the key again (its lease), not this instance's memory.
        expect(store.capabilities().memory!.answer('', 'k', 'f'.repeat(64))).toBeUndefined();
      },
    );
  });

  it('a store transaction whose DataSource cannot make a query runner', async () => {
    const dataSource = {
      createQueryRunner: () => {
        throw gone;
      },
    } as unknown as DataSource;
    expect(
      await outcome(() => TypeOrmStoreTransaction.begin(dataSource, 1000, true, () => true)),
    ).toBe('rejected: the DataSource is gone');
  });

  it('the start of an execution whose request cannot be read', async () => {
    const factory = new IdempotencyExecutionFactory(
      undefined as never,
      undefined as never,
      undefined as never,
      undefined as never,
      undefined as never,
    );
    const context = {
      switchToHttp: () => {
        throw new Error('no HTTP request here');
      },
    } as unknown as ExecutionContext;
    const won = {
      scope: '',
      key: 'k',
      ownerToken: 'o',
      recordId: 'r',
      attempt: 1,
      claimedAt: Date.now(),
      label: 'POST /orders',
    };
    expect(
      await outcome(() =>
        factory.start(context, {} as ResolvedIdempotencyRouteOptions, won as never),
      ),
    ).toBe('rejected: no HTTP request here');
  });
});
