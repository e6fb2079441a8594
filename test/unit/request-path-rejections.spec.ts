/**
 * The request path's steps that are not async functions (to spare a promise per request) still
 * fail by rejecting, never by throwing: the claim maps a rejection to its 503 (fail closed, SPEC
 * §9), while a throw would escape that mapping as a bare 500.
 */
import type { ExecutionContext } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { IdempotencyExecutionFactory } from '../../lib/execution/idempotency-execution.factory';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm';
import { TypeOrmStoreTransaction } from '../../lib/storage/typeorm/typeorm-store-transaction';
import type { ResolvedIdempotencyRouteOptions } from '../../lib/interfaces/idempotency-module-options.interface';

const gone = new Error('the DataSource is gone');

/** Calls `call`, and says whether it threw or what its promise settled to. */
async function outcome(call: () => Promise<unknown>): Promise<string> {
  let pending: Promise<unknown>;
  try {
    pending = call();
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

  it('a store transaction whose DataSource cannot make a query runner', async () => {
    const dataSource = {
      createQueryRunner: () => {
        throw gone;
      },
    } as unknown as DataSource;
    expect(await outcome(() => TypeOrmStoreTransaction.begin(dataSource, 1000, true))).toBe(
      'rejected: the DataSource is gone',
    );
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
