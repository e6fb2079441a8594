/**
 * The startup check of `run-scope-disable`: on where Node 20 to 23's `AsyncLocalStorage.disable()`
 * behaves as measured, off (saying so once) when it does not, and off without a word on Node 24,
 * which keeps stores without async hooks, or when NEST_IDEMPOTENCY_PLAIN names it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@nestjs/common';
import { runScopeDisableOn } from '../../lib/internals/run-scope-disable';

describe('runScopeDisableOn', () => {
  const warnings: unknown[] = [];
  beforeEach(() => {
    warnings.length = 0;
    jest
      .spyOn(Logger.prototype, 'warn')
      .mockImplementation((message) => void warnings.push(message));
  });
  afterEach(() => {
    jest.restoreAllMocks();
    delete process.env.NEST_IDEMPOTENCY_PLAIN;
  });

  it('is on on Node 20 to 23, off on Node 24 and when switched off, without a warning', () => {
    expect(runScopeDisableOn('20.20.2')).toBe(true);
    expect(runScopeDisableOn('24.0.0')).toBe(false);
    process.env.NEST_IDEMPOTENCY_PLAIN = 'run-scope-disable';
    expect(runScopeDisableOn('20.20.2')).toBe(false);
    expect(warnings).toEqual([]);
  });

  it('falls back, saying so once, when disable() no longer behaves as measured', () => {
    jest.spyOn(AsyncLocalStorage.prototype, 'disable').mockImplementation(() => {
      throw new Error('gone');
    });

    expect(runScopeDisableOn('20.20.2')).toBe(false);
    expect(runScopeDisableOn('20.20.2')).toBe(false);
    expect(warnings).toEqual([expect.stringContaining('"run-scope-disable" is off')]);
  });
});
