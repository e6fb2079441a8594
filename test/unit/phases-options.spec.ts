/**
 * `IdempotencyPhasesModule`'s options: one defaults object, ranges checked at bootstrap with the
 * fix in the message, strings from the environment taken where unambiguous, `false` sections.
 */
import { IdempotencyConfigurationError } from '../../lib';
import { DEFAULT_IDEMPOTENCY_PHASES_OPTIONS } from '../../lib/phases';
import {
  PHASES_OPTION_LIMITS,
  resolveIdempotencyPhasesOptions,
} from '../../lib/phases/idempotency-phases.defaults';
import type { IdempotencyPhasesModuleOptions } from '../../lib/phases';
import { namedRows } from '../shared/markdown';

function refusal(options: IdempotencyPhasesModuleOptions): string {
  try {
    resolveIdempotencyPhasesOptions(options);
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    return (error as Error).message;
  }
  throw new Error('the options were accepted');
}

describe('IdempotencyPhasesModule options', () => {
  it('resolve to the frozen defaults when none are given', () => {
    expect(resolveIdempotencyPhasesOptions()).toEqual(DEFAULT_IDEMPOTENCY_PHASES_OPTIONS);
    expect(Object.isFrozen(DEFAULT_IDEMPOTENCY_PHASES_OPTIONS)).toBe(true);
    expect(DEFAULT_IDEMPOTENCY_PHASES_OPTIONS).toMatchObject({
      maxAgeSeconds: 43_200,
      localStepAttempts: 5,
      foreignStepMarginSeconds: 2,
      completer: { enabled: true, intervalSeconds: 30, afterSeconds: 60, batchSize: 10 },
      jobs: { enabled: true, intervalSeconds: 1, maxAttempts: 10 },
    });
  });

  it('merge given values, turn sections off with false, take environment strings', () => {
    const resolved = resolveIdempotencyPhasesOptions({
      maxAgeSeconds: '600' as unknown as number,
      completer: false,
      jobs: { batchSize: 5, enabled: 'false' as unknown as boolean },
    });
    expect(resolved).toMatchObject({
      maxAgeSeconds: 600,
      completer: { enabled: false, intervalSeconds: 30 },
      jobs: { enabled: false, batchSize: 5, intervalSeconds: 1 },
    });
  });

  it.each<[string, IdempotencyPhasesModuleOptions, RegExp]>([
    ['maxAgeSeconds', { maxAgeSeconds: 0 }, /from 1 to 31536000/],
    ['localStepAttempts', { localStepAttempts: 1.5 }, /whole number of attempts/],
    ['completer.batchSize', { completer: { batchSize: 0 } }, /from 1 to 10000/],
    ['jobs.intervalSeconds', { jobs: { intervalSeconds: 3e6 } }, /setInterval/],
    ['jobs.maxAttempts', { jobs: { maxAttempts: 'many' as unknown as number } }, /environment/],
    ['jobs.enabled', { jobs: { enabled: 'on' as unknown as boolean } }, /true or false/],
    ['surprise', { surprise: 1 } as never, /Remove it/],
  ])('refuse a bad %s, naming it and the fix', (option, options, fix) => {
    const message = refusal(options);
    expect(message).toContain(`option "${option}" is invalid`);
    expect(message).toMatch(fix);
  });

  it('have a range for every numeric option, the default inside it, each in the docs', () => {
    const table = namedRows('docs/operations-and-jobs.md', '## Options');
    for (const [option, { min, max, example }] of Object.entries(PHASES_OPTION_LIMITS)) {
      expect(example).toBeGreaterThanOrEqual(min);
      expect(example).toBeLessThanOrEqual(max);
      const row = table.get(option)?.join(' | ');
      expect([option, row?.includes(`${min} to ${max}`)]).toEqual([option, true]);
    }
  });
});
