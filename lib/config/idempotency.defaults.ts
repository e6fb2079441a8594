import { FORBIDDEN_REPLAY_HEADERS, RESERVED_HEADER_PREFIX } from './idempotency.constants';
import { IdempotencyConfigurationError } from './idempotency-configuration.error';
import { resolveEncryptionOptions } from './encryption-options';
import type {
  IdempotencyWaitOptions,
  IdempotencyModuleOptions,
  ResolvedIdempotencyRouteOptions,
  IdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';

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
  wait: { maxSeconds: 0, defaultSeconds: 0, pollIntervalSeconds: 0.5 },
  maxRequestBytes: 1_048_576,
  maxResponseBytes: 1_048_576,
  storeBody: true,
  purge: {
    enabled: true,
    intervalSeconds: 60,
    batchSize: 1_000,
    abandonedRetentionSeconds: 2_592_000,
  },
  replayCache: { enabled: true, maxEntries: 10_000, maxBytes: 16 * 1024 * 1024 },
  maxWaiters: 1_000,
  store: 'typeorm',
  problemTypeBaseUri: 'urn:nest-idempotency:problem:',
  errorBody: null,
  metrics: true,
  openApi: true,
  encryption: null,
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
  maxRequestBytes: limit({
    min: 1,
    max: 1_073_741_824,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.maxRequestBytes,
    note: 'At most 1 GiB.',
  }),
  maxResponseBytes: limit({
    min: 0,
    max: 1_073_741_824,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.maxResponseBytes,
    note: 'At most 1 GiB, the most a PostgreSQL bytea value holds.',
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
  'purge.abandonedRetentionSeconds': limit({
    min: 1,
    max: 315_360_000,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.purge.abandonedRetentionSeconds,
  }),
  'replayCache.maxEntries': limit({
    min: 1,
    max: 10_000_000,
    integer: true,
    unit: 'entries',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxEntries,
    note: 'replayCache: false turns the cache off.',
  }),
  'wait.maxSeconds': limit({
    min: 0,
    max: 300,
    integer: false,
    unit: 'seconds',
    example: 10,
    note: 'A waiting request holds its connection (and, behind a proxy, a worker): keep it short.',
  }),
  'wait.defaultSeconds': limit({
    min: 0,
    max: 300,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.wait.defaultSeconds,
    note: 'It is capped by wait.maxSeconds.',
  }),
  'wait.pollIntervalSeconds': limit({
    min: 0.05,
    max: 60,
    integer: false,
    unit: 'seconds',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.wait.pollIntervalSeconds,
  }),
  maxWaiters: limit({
    min: 1,
    max: 1_000_000,
    integer: true,
    unit: 'requests',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.maxWaiters,
  }),
  'replayCache.maxBytes': limit({
    min: 1,
    max: 4 * 1024 ** 3,
    integer: true,
    unit: 'bytes',
    example: DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxBytes,
    note: 'At most 4 GiB; replayCache: false turns the cache off.',
  }),
});

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
export function checkRange(option: IdempotencyLimitedOption, given: unknown): number {
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
export function validateRouteOptions<T extends IdempotencyRouteOptions>(options: T): T {
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
  if ('storeBody' in o) o.storeBody = checkBoolean('storeBody', o.storeBody);
  for (const option of [
    'ttlSeconds',
    'lockTimeoutSeconds',
    'maxLockHoldSeconds',
    'maxRequestBytes',
    'maxResponseBytes',
  ] as const) {
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
    const refused = o.replayHeaders.find(
      (h: string) => FORBIDDEN_REPLAY_HEADERS.has(h) || h.startsWith(RESERVED_HEADER_PREFIX),
    );
    check(
      refused === undefined,
      'replayHeaders',
      o.replayHeaders,
      `"${refused}" cannot be replayed: it belongs to one connection or one response. Remove it.`,
    );
  }
  if ('wait' in o) o.wait = checkWait(o.wait);
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

const WAIT_FIELDS = ['maxSeconds', 'defaultSeconds', 'pollIntervalSeconds'] as const;

/**
 * Checks the `wait` fields that are present (a route's may name only some) and refuses any other.
 * @returns a copy, numbers from the environment converted
 */
function checkWait(given: unknown): Partial<IdempotencyWaitOptions> {
  const fix =
    'Use an object such as { maxSeconds: 10 }, or leave it out (no waiting: 409 at once).';
  check(typeof given === 'object' && given !== null && !Array.isArray(given), 'wait', given, fix);
  const wait: Record<string, unknown> = { ...(given as object) };
  const unknown = Object.keys(wait).find(
    (name) => !(WAIT_FIELDS as readonly string[]).includes(name),
  );
  check(unknown === undefined, `wait.${unknown}`, wait[unknown!], `Use ${WAIT_FIELDS.join(', ')}.`);
  for (const field of WAIT_FIELDS) {
    if (wait[field] !== undefined) wait[field] = checkRange(`wait.${field}`, wait[field]);
  }
  return wait as Partial<IdempotencyWaitOptions>;
}

/** `given`'s `wait` fields over `base`'s, field by field; `undefined` keeps `base`. */
function mergeWait(base: IdempotencyWaitOptions, given: unknown): IdempotencyWaitOptions {
  return given === undefined ? base : { ...base, ...withoutUndefined(checkWait(given)) };
}

/** The fields that are set: an option given as `undefined` keeps its default. Internal. */
export function withoutUndefined<T extends object>(given: T | undefined): Partial<T> {
  return Object.fromEntries(
    Object.entries(given ?? {}).filter(([, value]) => value !== undefined),
  ) as Partial<T>;
}

/**
 * A group of options that `false` switches off: the defaults, with `enabled: false` for `false`
 * (or the string `"false"` from the environment), or with the given fields merged over them.
 * @throws IdempotencyConfigurationError when `enabled` is not a boolean
 */
export function switchableSection<T extends { enabled: boolean }>(
  name: string,
  given: Partial<T> | false | undefined,
  defaults: Readonly<T>,
): T {
  if (typeof given === 'string') {
    const on = checkBoolean(name, given, 'Use false, or an object of its options.');
    return { ...defaults, enabled: on };
  }
  const section: T =
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
  const { purge, replayCache, encryption, ...rest } = defined;
  const purgeOptions = switchableSection('purge', purge, DEFAULT_IDEMPOTENCY_OPTIONS.purge);
  purgeOptions.intervalSeconds = checkRange('purge.intervalSeconds', purgeOptions.intervalSeconds);
  purgeOptions.batchSize = checkRange('purge.batchSize', purgeOptions.batchSize);
  purgeOptions.abandonedRetentionSeconds = checkRange(
    'purge.abandonedRetentionSeconds',
    purgeOptions.abandonedRetentionSeconds,
  );
  const cacheOptions = switchableSection(
    'replayCache',
    replayCache,
    DEFAULT_IDEMPOTENCY_OPTIONS.replayCache,
  );
  cacheOptions.maxEntries = checkRange('replayCache.maxEntries', cacheOptions.maxEntries);
  cacheOptions.maxBytes = checkRange('replayCache.maxBytes', cacheOptions.maxBytes);
  const merged = validateRouteOptions({
    ...DEFAULT_IDEMPOTENCY_OPTIONS,
    ...rest,
    wait: mergeWait(DEFAULT_IDEMPOTENCY_OPTIONS.wait, rest.wait),
  } as ResolvedIdempotencyOptions);
  merged.maxWaiters = checkRange('maxWaiters', merged.maxWaiters);
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
    encryption: resolveEncryptionOptions(encryption),
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
  base: ResolvedIdempotencyRouteOptions,
  ...layers: (IdempotencyRouteOptions | undefined)[]
): ResolvedIdempotencyRouteOptions {
  const merged: any = { ...base };
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) {
      if (k === 'wait') merged.wait = mergeWait(merged.wait, v);
      else if (v !== undefined) merged[k] = v;
    }
  }
  return merged;
}
