import {
  check,
  checkNumber,
  count,
  seconds,
  switchableSection,
  withoutUndefined,
} from '../config/idempotency.defaults';
import type { IdempotencyOptionLimit } from '../config/idempotency.defaults';
import type {
  IdempotencyPhasesModuleOptions,
  ResolvedIdempotencyPhasesOptions,
} from './idempotency-phases.options';

/** The one place the defaults of `IdempotencyPhasesModule` live; the README's table is tested. */
export const DEFAULT_IDEMPOTENCY_PHASES_OPTIONS: Readonly<ResolvedIdempotencyPhasesOptions> =
  Object.freeze({
    maxAgeSeconds: 43_200,
    localStepAttempts: 5,
    foreignStepMarginSeconds: 2,
    completer: Object.freeze({
      enabled: true,
      intervalSeconds: 30,
      afterSeconds: 60,
      batchSize: 10,
    }),
    jobs: Object.freeze({
      enabled: true,
      intervalSeconds: 1,
      maxIdleIntervalSeconds: 30,
      batchSize: 20,
      timeoutSeconds: 60,
      maxAttempts: 10,
      backoffSeconds: 1,
      maxBackoffSeconds: 600,
    }),
  });

const { completer, jobs, ...phases } = DEFAULT_IDEMPOTENCY_PHASES_OPTIONS;
const INTERVAL = 'Longer periods overflow setInterval (2^31-1 ms).';

/** The ranges of the numeric options of `IdempotencyPhasesModule`, checked at bootstrap. */
export const PHASES_OPTION_LIMITS: Readonly<Record<string, IdempotencyOptionLimit>> = Object.freeze(
  {
    maxAgeSeconds: seconds(1, 31_536_000, phases.maxAgeSeconds),
    localStepAttempts: count(1, 100, 'attempts', phases.localStepAttempts),
    foreignStepMarginSeconds: seconds(0, 3_600, phases.foreignStepMarginSeconds),
    'completer.intervalSeconds': seconds(0.1, 2_147_483, completer.intervalSeconds, INTERVAL),
    'completer.afterSeconds': seconds(0, 31_536_000, completer.afterSeconds),
    'completer.batchSize': count(1, 10_000, 'records', completer.batchSize),
    'jobs.intervalSeconds': seconds(0.1, 2_147_483, jobs.intervalSeconds, INTERVAL),
    'jobs.maxIdleIntervalSeconds': seconds(0.1, 2_147_483, jobs.maxIdleIntervalSeconds),
    'jobs.batchSize': count(1, 10_000, 'jobs', jobs.batchSize),
    'jobs.timeoutSeconds': seconds(0.05, 86_400, jobs.timeoutSeconds),
    'jobs.maxAttempts': count(1, 1_000, 'attempts', jobs.maxAttempts),
    'jobs.backoffSeconds': seconds(0, 86_400, jobs.backoffSeconds),
    'jobs.maxBackoffSeconds': seconds(0, 86_400, jobs.maxBackoffSeconds),
  },
);

/** Checks every numeric field of `values` against its range under `prefix`, in place. */
function checkSection(prefix: string, values: object, section: string): void {
  for (const [name, value] of Object.entries(values)) {
    if (name === 'enabled') continue;
    const option = `${prefix}${name}`;
    const range = PHASES_OPTION_LIMITS[option];
    check(range !== undefined, option, value, `Remove it: ${section} has no such option.`);
    (values as Record<string, unknown>)[name] = checkNumber(option, value, range);
  }
}

/**
 * Merges `IdempotencyPhasesModule` options over `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS` and
 * validates them (numbers and booleans read from the environment as strings are taken).
 * @param options - what the application passed to `IdempotencyPhasesModule.forRoot()`
 * @returns every option, resolved
 * @throws IdempotencyConfigurationError at bootstrap, naming the option and the fix
 */
export function resolveIdempotencyPhasesOptions(
  options: IdempotencyPhasesModuleOptions = {},
): ResolvedIdempotencyPhasesOptions {
  const { completer: given, jobs: givenJobs, ...rest } = withoutUndefined(options);
  const top = { ...phases, ...rest };
  checkSection('', top, 'IdempotencyPhasesModule');
  const completerOptions = switchableSection('completer', given, completer);
  checkSection('completer.', completerOptions, 'completer');
  const jobsOptions = switchableSection('jobs', givenJobs, jobs);
  checkSection('jobs.', jobsOptions, 'jobs');
  return { ...top, completer: completerOptions, jobs: jobsOptions };
}
