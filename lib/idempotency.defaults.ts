import { FORBIDDEN_REPLAY_HEADERS } from './idempotency.constants';
import { IdempotencyConfigurationError } from './errors/idempotency-configuration.error';
import type {
  IdempotencyModuleOptions,
  IdempotencyRouteOptions,
  IdempotentOptions,
  ResolvedIdempotencyOptions,
} from './interfaces/idempotency-module-options.interface';

const DEFAULT_STORE_STATUSES: number[] = [];
for (let status = 200; status < 500; status++) {
  if (![408, 409, 425, 429].includes(status)) DEFAULT_STORE_STATUSES.push(status);
}

/**
 * Scope of a request by default: the authenticated user's id when there is one. Returned as it
 * is, so a number is used as its string form and an id that is not a string or a number is
 * refused rather than every such user sharing the scope "[object Object]".
 */
function defaultScope(request: any): string | number | bigint | undefined {
  return request?.user?.id;
}

/**
 * The one place every default lives. The README's options table is tested against it.
 */
export const DEFAULT_IDEMPOTENCY_OPTIONS: Readonly<ResolvedIdempotencyOptions> = Object.freeze({
  header: 'Idempotency-Key',
  required: true,
  ttlSeconds: 86_400,
  lockTimeoutSeconds: 60,
  maxLockHoldSeconds: 3_600,
  scope: defaultScope,
  fingerprintHeaders: [],
  storeStatuses: DEFAULT_STORE_STATUSES,
  replayHeaders: [
    'content-type',
    'location',
    'content-language',
    'content-location',
    'etag',
    'last-modified',
  ],
  retryAfterSeconds: 1,
  transactional: false,
  purge: { enabled: true, intervalSeconds: 60, batchSize: 1_000 },
  replayCache: { enabled: true, maxEntries: 10_000, maxBytes: 16 * 1024 * 1024 },
  phases: {
    maxAgeSeconds: 43_200,
    abandonedRetentionSeconds: 2_592_000,
    localStepAttempts: 5,
    foreignStepMarginSeconds: 2,
  },
  completer: { enabled: true, intervalSeconds: 30, afterSeconds: 60, batchSize: 10 },
  jobs: {
    enabled: true,
    intervalSeconds: 1,
    maxIdleIntervalSeconds: 30,
    batchSize: 20,
    timeoutSeconds: 60,
    maxAttempts: 10,
    backoffSeconds: 1,
    maxBackoffSeconds: 600,
  },
  store: 'typeorm',
  problemTypeBaseUri: 'urn:nest-idempotency:problem:',
  errorBody: null,
  metrics: true,
  openApi: true,
});

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The range a numeric option must fall in, and what to say when it does not. */
export interface IdempotencyOptionLimit {
  /** Smallest accepted value (inclusive). */
  readonly min: number;
  /** Largest accepted value (inclusive). */
  readonly max: number;
  /** Whether only whole numbers are accepted. */
  readonly integer: boolean;
  /** What the number counts, as written in the message ("seconds", "bytes"...). */
  readonly unit: string;
  /** A good value, shown in the message: the option's default. */
  readonly example: number;
  /** Why the range is what it is, or another hint; appended to the message. */
  readonly note?: string;
}

/** Freezes a range. Internal. */
export function limit(spec: IdempotencyOptionLimit): IdempotencyOptionLimit {
  return Object.freeze(spec);
}

/**
 * The ranges the library can honour for each numeric option, checked at bootstrap (and at
 * decoration for route options). Internal: the messages and the tests read the bounds from here.
 */
export const OPTION_LIMITS = Object.freeze({
  ttlSeconds: limit({
    min: 0.1,
    max: 315_360_000,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.ttlSeconds,
    note: 'At most 10 years, so PostgreSQL timestamps and JavaScript timers stay in range.',
  }),
  lockTimeoutSeconds: limit({
    min: 0.1,
    max: 86_400,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.lockTimeoutSeconds,
    note:
      'The lease is renewed every third of it (never more often than every 20 ms), so a shorter ' +
      'one lapses before it can be renewed; values under 1 s are for tests.',
  }),
  maxLockHoldSeconds: limit({
    min: 0.1,
    max: 31_536_000,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.maxLockHoldSeconds,
    note: 'At most 1 year.',
  }),
  retryAfterSeconds: limit({
    min: 0,
    max: 86_400,
    integer: true,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.retryAfterSeconds,
  }),
  'purge.intervalSeconds': limit({
    min: 0.1,
    max: 2_147_483,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.purge.intervalSeconds,
    note:
      'Longer periods overflow setInterval (2^31-1 ms), which then fires every millisecond; ' +
      'purge: false turns the schedule off.',
  }),
  'purge.batchSize': limit({
    min: 1,
    max: 100_000,
    integer: true,
    unit: 'rows',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.purge.batchSize,
  }),
  'replayCache.maxEntries': limit({
    min: 1,
    max: 10_000_000,
    integer: true,
    unit: 'entries',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxEntries,
    note: 'replayCache: false turns the cache off.',
  }),
  'replayCache.maxBytes': limit({
    min: 1,
    max: 4 * 1024 ** 3,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxBytes,
    note: 'At most 4 GiB; replayCache: false turns the cache off.',
  }),
  ...phaseLimits(),
});

function seconds(min: number, max: number, example: number, note?: string): IdempotencyOptionLimit {
  return limit({ min, max, integer: false, unit: 'seconds', example, note });
}

function count(min: number, max: number, unit: string, example: number): IdempotencyOptionLimit {
  return limit({ min, max, integer: true, unit, example });
}

/** Ranges of the options of operations in phases, the completer and the drainer. */
function phaseLimits() {
  const { phases, completer, jobs } = DEFAULT_IDEMPOTENCY_OPTIONS;
  const interval = 'Longer periods overflow setInterval (2^31-1 ms).';
  return {
    'phases.maxAgeSeconds': seconds(1, 31_536_000, phases.maxAgeSeconds),
    'phases.abandonedRetentionSeconds': seconds(1, 315_360_000, phases.abandonedRetentionSeconds),
    'phases.localStepAttempts': count(1, 100, 'attempts', phases.localStepAttempts),
    'phases.foreignStepMarginSeconds': seconds(0, 3_600, phases.foreignStepMarginSeconds),
    'completer.intervalSeconds': seconds(0.1, 2_147_483, completer.intervalSeconds, interval),
    'completer.afterSeconds': seconds(0, 31_536_000, completer.afterSeconds),
    'completer.batchSize': count(1, 10_000, 'records', completer.batchSize),
    'jobs.intervalSeconds': seconds(0.1, 2_147_483, jobs.intervalSeconds, interval),
    'jobs.maxIdleIntervalSeconds': seconds(0.1, 2_147_483, jobs.maxIdleIntervalSeconds),
    'jobs.batchSize': count(1, 10_000, 'jobs', jobs.batchSize),
    'jobs.timeoutSeconds': seconds(0.05, 86_400, jobs.timeoutSeconds),
    'jobs.maxAttempts': count(1, 1_000, 'attempts', jobs.maxAttempts),
    'jobs.backoffSeconds': seconds(0, 86_400, jobs.backoffSeconds),
    'jobs.maxBackoffSeconds': seconds(0, 86_400, jobs.maxBackoffSeconds),
  } as const;
}

/** A numeric option with a range in `OPTION_LIMITS`. */
export type IdempotencyLimitedOption = keyof typeof OPTION_LIMITS;

/**
 * Refuses an option's value, naming the option and how to fix it. Internal (the TypeORM store's
 * options use it too).
 * @throws IdempotencyConfigurationError when `ok` is false
 */
export function check(ok: boolean, option: string, value: unknown, fix: string): void {
  if (!ok) throw IdempotencyConfigurationError.invalidOption(option, value, fix);
}

/** A decimal number as written in an environment variable: `3`, `-0.5`, `1e3`. */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i;

/**
 * An option read from the environment (through `ConfigService`, say) arrives as a string even
 * when typed as a number or a boolean: the value it stands for, or `undefined` when it stands
 * for none, with the sentence the refusal then ends with.
 */
function fromEnvironment(
  value: string,
  parse: (text: string) => unknown,
  expected: string,
): { value: unknown; hint: string } {
  return {
    value: parse(value.trim()),
    hint: ` (environment values are strings: ${JSON.stringify(value)} is not ${expected})`,
  };
}

/**
 * Refuses a value of a numeric option outside its range in `OPTION_LIMITS` (NaN, Infinity and
 * non-numbers included), with a message that gives the range and an example. A string holding a
 * decimal number (from the environment) is taken as that number.
 * @returns the value as a number
 */
function checkRange(option: IdempotencyLimitedOption, given: unknown): number {
  return checkNumber(option, given, OPTION_LIMITS[option]);
}

/**
 * `checkRange` for a range kept elsewhere (the TypeORM store's options). Internal.
 * @returns the value as a number
 */
export function checkNumber(option: string, given: unknown, range: IdempotencyOptionLimit): number {
  const { min, max, integer, unit, example, note } = range;
  const { value, hint } =
    typeof given === 'string'
      ? fromEnvironment(given, (t) => (DECIMAL.test(t) ? Number(t) : undefined), 'a number')
      : { value: given, hint: '' };
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= min &&
    value <= max &&
    (!integer || Number.isInteger(value));
  const kind = integer ? `a whole number of ${unit}` : `a number of ${unit}`;
  const fix = `Use ${kind} from ${min} to ${max}, e.g. ${example}.${note ? ` ${note}` : ''}`;
  check(ok, option, given, value === undefined ? `${fix}${hint}` : fix);
  return value as number;
}

/**
 * Refuses a value of a boolean option that is not a boolean. The strings `"true"` and `"false"`
 * (from the environment, any case) are taken as the booleans they name.
 * @returns the value as a boolean
 */
export function checkBoolean(option: string, given: unknown, fix = 'Use true or false.'): boolean {
  const words: Record<string, boolean> = { true: true, false: false };
  const { value, hint } =
    typeof given === 'string'
      ? fromEnvironment(given, (t) => words[t.toLowerCase()], 'true or false')
      : { value: given, hint: '' };
  check(typeof value === 'boolean', option, given, `${fix}${hint}`);
  return value as boolean;
}

function headerList(value: unknown): boolean {
  return Array.isArray(value) && value.every((h) => typeof h === 'string' && TOKEN.test(h));
}

/**
 * Checks the route-level options that are present and normalises header names to lower case.
 *
 * @param options - a full or partial set of route options
 * @returns a copy with header lists lower-cased
 * @throws IdempotencyConfigurationError naming the first wrong option and how to fix it
 */
export function validateRouteOptions<T extends IdempotentOptions>(options: T): T {
  const o: any = { ...options };
  if ('header' in o) {
    check(
      typeof o.header === 'string' && TOKEN.test(o.header),
      'header',
      o.header,
      'Use an HTTP header name such as "Idempotency-Key".',
    );
  }
  if ('required' in o) o.required = checkBoolean('required', o.required);
  if ('transactional' in o) o.transactional = checkBoolean('transactional', o.transactional);
  for (const option of ['ttlSeconds', 'lockTimeoutSeconds', 'maxLockHoldSeconds'] as const) {
    if (option in o) o[option] = checkRange(option, o[option]);
  }
  if ('scope' in o) {
    check(typeof o.scope === 'function', 'scope', o.scope, 'Use a function (request) => string.');
  }
  if ('retryAfterSeconds' in o)
    o.retryAfterSeconds = checkRange('retryAfterSeconds', o.retryAfterSeconds);
  if ('fingerprintHeaders' in o) {
    check(
      headerList(o.fingerprintHeaders),
      'fingerprintHeaders',
      o.fingerprintHeaders,
      'Use an array of header names, e.g. ["x-account-id"].',
    );
    o.fingerprintHeaders = o.fingerprintHeaders.map((h: string) => h.toLowerCase());
  }
  if ('replayHeaders' in o) {
    check(
      headerList(o.replayHeaders),
      'replayHeaders',
      o.replayHeaders,
      'Use an array of header names, e.g. ["content-type", "location"].',
    );
    o.replayHeaders = o.replayHeaders.map((h: string) => h.toLowerCase());
    const refused = o.replayHeaders.find((h: string) => FORBIDDEN_REPLAY_HEADERS.has(h));
    check(
      refused === undefined,
      'replayHeaders',
      o.replayHeaders,
      `"${refused}" cannot be replayed: it belongs to one connection or one response. Remove it.`,
    );
  }
  if ('storeStatuses' in o) {
    check(
      Array.isArray(o.storeStatuses) &&
        o.storeStatuses.every(
          (s: unknown) => Number.isInteger(s) && (s as number) >= 100 && (s as number) <= 599,
        ),
      'storeStatuses',
      o.storeStatuses,
      'Use an array of HTTP status codes (whole numbers from 100 to 599).',
    );
  }
  return o as T;
}

/** The fields that are set: an option given as `undefined` keeps its default. */
function withoutUndefined<T extends object>(given: T | undefined): Partial<T> {
  return Object.fromEntries(
    Object.entries(given ?? {}).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}

/**
 * A group of options that `false` switches off: the defaults, with `enabled: false` for `false`
 * (or the string `"false"` from the environment), or with the given fields merged over them.
 * @throws IdempotencyConfigurationError when `enabled` is not a boolean
 */
function switchableSection<K extends 'purge' | 'replayCache' | 'completer' | 'jobs'>(
  name: K,
  given: Partial<ResolvedIdempotencyOptions[K]> | false | undefined,
): ResolvedIdempotencyOptions[K] {
  const defaults = DEFAULT_IDEMPOTENCY_OPTIONS[name];
  if (typeof given === 'string') {
    const on = checkBoolean(name, given, 'Use false, or an object of its options.');
    return { ...defaults, enabled: on };
  }
  const section =
    given === false ? { ...defaults, enabled: false } : { ...defaults, ...withoutUndefined(given) };
  section.enabled = checkBoolean(`${name}.enabled`, section.enabled);
  return section;
}

/**
 * Merges module options over `DEFAULT_IDEMPOTENCY_OPTIONS` and validates the result.
 *
 * @param options - what the application passed to `forRoot()` / `forRootAsync()`
 * @returns every option, resolved
 * @throws IdempotencyConfigurationError at bootstrap, with a message that says how to fix it
 */
export function resolveIdempotencyOptions(
  options: IdempotencyModuleOptions = {},
): ResolvedIdempotencyOptions {
  const defined = withoutUndefined(options) as IdempotencyModuleOptions;
  const { purge, replayCache, phases, completer, jobs, ...rest } = defined;
  const phaseOptions = { ...DEFAULT_IDEMPOTENCY_OPTIONS.phases, ...withoutUndefined(phases) };
  const completerOptions = switchableSection('completer', completer);
  const jobsOptions = switchableSection('jobs', jobs);
  for (const [section, values] of [
    ['phases', phaseOptions],
    ['completer', completerOptions],
    ['jobs', jobsOptions],
  ] as const) {
    for (const [name, value] of Object.entries(values)) {
      if (name === 'enabled') continue;
      const option = `${section}.${name}`;
      check(option in OPTION_LIMITS, option, value, `Remove it: ${section} has no such option.`);
      (values as Record<string, unknown>)[name] = checkRange(
        option as IdempotencyLimitedOption,
        value,
      );
    }
  }
  const purgeOptions = switchableSection('purge', purge);
  purgeOptions.intervalSeconds = checkRange('purge.intervalSeconds', purgeOptions.intervalSeconds);
  purgeOptions.batchSize = checkRange('purge.batchSize', purgeOptions.batchSize);
  const cacheOptions = switchableSection('replayCache', replayCache);
  cacheOptions.maxEntries = checkRange('replayCache.maxEntries', cacheOptions.maxEntries);
  cacheOptions.maxBytes = checkRange('replayCache.maxBytes', cacheOptions.maxBytes);
  const merged = validateRouteOptions({
    ...DEFAULT_IDEMPOTENCY_OPTIONS,
    ...rest,
  } as ResolvedIdempotencyOptions);
  check(
    merged.store === 'typeorm' ||
      merged.store === 'memory' ||
      typeof merged.store === 'function' ||
      typeof (merged.store as { create?: unknown } | null)?.create === 'function',
    'store',
    merged.store,
    'Use "typeorm", typeOrmStore({ ... }) from nest-idempotency/typeorm, "memory", or a class ' +
      'that extends IdempotencyStore.',
  );
  check(
    typeof merged.problemTypeBaseUri === 'string' &&
      /^[a-z][a-z0-9+.-]*:/i.test(merged.problemTypeBaseUri),
    'problemTypeBaseUri',
    merged.problemTypeBaseUri,
    'Use an absolute URI such as "https://example.com/problems/".',
  );
  check(
    merged.errorBody === null || typeof merged.errorBody === 'function',
    'errorBody',
    merged.errorBody,
    'Use a function (problem) => ({ body, contentType? }), or null for problem+json.',
  );
  merged.metrics = checkBoolean('metrics', merged.metrics);
  merged.openApi = checkBoolean('openApi', merged.openApi);
  return {
    ...merged,
    purge: purgeOptions,
    replayCache: cacheOptions,
    phases: phaseOptions,
    completer: completerOptions,
    jobs: jobsOptions,
  };
}

/**
 * Merges route options over module options, field by field.
 *
 * @param base - the module's resolved options
 * @param layers - class options, then handler options (later wins)
 * @returns the options in force for one route
 */
export function mergeRouteOptions(
  base: IdempotencyRouteOptions,
  ...layers: (IdempotentOptions | undefined)[]
): IdempotencyRouteOptions {
  const merged: any = { ...base };
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) merged[k] = v;
  }
  return merged;
}
