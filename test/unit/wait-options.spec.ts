/**
 * The `wait` option: off by default, merged field by field (handler over class over module),
 * each field checked where it is given (at decoration for a route), any other field refused, and
 * numbers from the environment accepted as elsewhere; `maxWaiters` is module-level.
 */
import {
  DEFAULT_IDEMPOTENCY_OPTIONS,
  mergeRouteOptions,
  resolveIdempotencyOptions,
  validateRouteOptions,
} from '../../lib/config/idempotency.defaults';
import { IdempotencyConfigurationError } from '../../lib/config/idempotency-configuration.error';

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    return (error as Error).message;
  }
  throw new Error('accepted');
}

describe('the wait option', () => {
  it('is off by default: no route waits', () => {
    expect(resolveIdempotencyOptions({}).wait).toEqual({
      maxSeconds: 0,
      defaultSeconds: 0,
      pollIntervalSeconds: 0.5,
    });
    expect(resolveIdempotencyOptions({}).maxWaiters).toBe(1000);
  });

  it('merges field by field: module, then class, then handler', () => {
    const module = resolveIdempotencyOptions({ wait: { maxSeconds: 5, pollIntervalSeconds: 1 } });
    expect(module.wait).toEqual({ maxSeconds: 5, defaultSeconds: 0, pollIntervalSeconds: 1 });
    const route = mergeRouteOptions(
      module,
      validateRouteOptions({ wait: { defaultSeconds: 2 } }),
      validateRouteOptions({ wait: { maxSeconds: 10, defaultSeconds: undefined } }),
    );
    expect(route.wait).toEqual({ maxSeconds: 10, defaultSeconds: 2, pollIntervalSeconds: 1 });
    // The module's own object is not changed by a route's merge.
    expect(module.wait.maxSeconds).toBe(5);
    expect(DEFAULT_IDEMPOTENCY_OPTIONS.wait.maxSeconds).toBe(0);
  });

  it('accepts numbers from the environment', () => {
    const o = resolveIdempotencyOptions({
      wait: { maxSeconds: '10' as unknown as number, maxWaiters: ' 50 ' as unknown as number },
    });
    expect(o.wait.maxSeconds).toBe(10);
    expect(o.maxWaiters).toBe(50);
  });

  it.each<[string, () => unknown, RegExp]>([
    [
      'wait that is not an object',
      () => resolveIdempotencyOptions({ wait: 10 as never }),
      /option "wait" is invalid.*\{ maxSeconds: 10 \}/,
    ],
    [
      'a misspelt field',
      () => validateRouteOptions({ wait: { maxSecond: 10 } as never }),
      /option "wait\.maxSecond" is invalid.*maxSeconds, defaultSeconds, pollIntervalSeconds/,
    ],
    [
      'a wait past 300 s, at decoration',
      () => validateRouteOptions({ wait: { maxSeconds: 301 } }),
      /option "wait\.maxSeconds" is invalid.*from 0 to 300/,
    ],
    [
      'a negative defaultSeconds',
      () => resolveIdempotencyOptions({ wait: { defaultSeconds: -1 } }),
      /option "wait\.defaultSeconds" is invalid/,
    ],
    [
      'a poll faster than every 50 ms',
      () => resolveIdempotencyOptions({ wait: { pollIntervalSeconds: 0.01 } }),
      /option "wait\.pollIntervalSeconds" is invalid.*from 0\.05 to 60/,
    ],
    [
      'no room for any waiter',
      () => resolveIdempotencyOptions({ wait: { maxWaiters: 0 } }),
      /option "wait\.maxWaiters" is invalid.*whole number of requests from 1 to 1000000/,
    ],
  ])('refuses %s, saying how to fix it', (_, fn, message) => {
    expect(refusal(fn)).toMatch(message);
  });
});
