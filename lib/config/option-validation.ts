import { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';
import { resolveEncryptionOptions } from './encryption-options';
import { FORBIDDEN_REPLAY_HEADERS, RESERVED_HEADER_PREFIX } from './idempotency.constants';
import { checkBoolean, checkNumber } from './option-checks';
import { check } from './option-groups';
import { OPTION_LIMITS } from './option-limits';
import type { IdempotencyLimitedOption } from './option-limits';
import type {
  FlatIdempotencyRouteOptions,
  IdempotencyWaitOptions,
} from '../interfaces/idempotency-module-options.interface';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Checks one option's value and returns it as the library reads it. */
type OptionCheck = (value: any, option: string) => unknown;

/** A check that accepts the value as it is or refuses it with `fix`. */
function accept(test: (value: any) => boolean, fix: string): OptionCheck {
  return (value, option) => {
    check(test(value), option, value, fix);
    return value;
  };
}

/** A boolean option (`"true"` and `"false"` from the environment accepted). */
const flag: OptionCheck = (value, option) => checkBoolean(option, value);

/** A numeric option with a range in `OPTION_LIMITS`. */
const ranged: OptionCheck = (value, option) =>
  checkNumber(option, value, OPTION_LIMITS[option as IdempotencyLimitedOption]);

/** A list of header names, lower-cased. */
function headerNames(example: string): (value: any, option: string) => string[] {
  return (value, option) => {
    check(
      Array.isArray(value) && value.every((h) => typeof h === 'string' && TOKEN.test(h)),
      option,
      value,
      `Use an array of header names, e.g. ${example}.`,
    );
    return value.map((h: string) => h.toLowerCase());
  };
}

const replayHeaderNames = headerNames('["content-type", "location"]');

/** Each route option's check, in the order they run: a refusal names the first wrong one. */
const ROUTE_CHECKS: Readonly<Record<string, OptionCheck>> = {
  header: accept(
    (value) => typeof value === 'string' && TOKEN.test(value),
    'Use an HTTP header name such as "Idempotency-Key".',
  ),
  required: flag,
  transactional: flag,
  storeBody: flag,
  ttlSeconds: ranged,
  lockTimeoutSeconds: ranged,
  maxLockHoldSeconds: ranged,
  maxRequestBytes: ranged,
  maxResponseBytes: ranged,
  scope: accept((value) => typeof value === 'function', 'Use a function (request) => string.'),
  retryAfterSeconds: ranged,
  fingerprintHeaders: headerNames('["x-account-id"]'),
  replayHeaders: (value, option) => {
    const names = replayHeaderNames(value, option);
    const refused = names.find(
      (h) => FORBIDDEN_REPLAY_HEADERS.has(h) || h.startsWith(RESERVED_HEADER_PREFIX),
    );
    check(
      refused === undefined,
      option,
      names,
      `"${refused}" cannot be replayed: it belongs to one connection or one response. Remove it.`,
    );
    return names;
  },
  wait: checkWait,
  storeStatuses: accept(
    (value) =>
      Array.isArray(value) && value.every((s) => Number.isInteger(s) && s >= 100 && s <= 599),
    'Use an array of HTTP status codes (whole numbers from 100 to 599).',
  ),
};

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

/** A switchable section (`purge`, `replayCache`), each of its numbers checked against its range. */
function rangedSection(defaults: Readonly<{ enabled: boolean }>): OptionCheck {
  return (given, name) => {
    const section: Record<string, unknown> = switchableSection(name, given, defaults);
    for (const field of Object.keys(defaults)) {
      if (field !== 'enabled') section[field] = ranged(section[field], `${name}.${field}`);
    }
    return section;
  };
}

/**
 * Every module option's check, in the order they run: the sections, the route options, then what
 * only `forRoot()` takes. Internal.
 */
export const MODULE_CHECKS: Readonly<Record<string, OptionCheck>> = {
  purge: rangedSection(DEFAULT_IDEMPOTENCY_OPTIONS.purge),
  replayCache: rangedSection(DEFAULT_IDEMPOTENCY_OPTIONS.replayCache),
  // A spread keeps a key's first place: the module's `wait` is checked right after the sections,
  // before the other route options.
  wait: checkWait,
  ...ROUTE_CHECKS,
  maxWaiters: ranged,
  store: accept(
    (store) =>
      store === 'typeorm' ||
      store === 'memory' ||
      typeof store === 'function' ||
      typeof store?.create === 'function',
    'Use "typeorm", typeOrmStore({ ... }) from nest-idempotency/typeorm, "memory", or a class ' +
      'that extends IdempotencyStore.',
  ),
  problemTypeBaseUri: accept(
    (uri) => typeof uri === 'string' && /^[a-z][a-z0-9+.-]*:/i.test(uri),
    'Use an absolute URI such as "https://example.com/problems/".',
  ),
  errorBody: accept(
    (render) => render === null || typeof render === 'function',
    'Use a function (problem) => ({ body, contentType? }), or null for problem+json.',
  ),
  metrics: flag,
  openApi: flag,
  encryption: resolveEncryptionOptions,
};

/**
 * Checks the route-level options that are present (flattened from their groups) and normalises
 * header names to lower case.
 *
 * @param options - a full or partial set of route options
 * @param checks - the checks to run (the module's add its own options to the route's)
 * @returns a copy with header lists lower-cased
 * @throws IdempotencyConfigurationError naming the first wrong option and how to fix it
 */
export function validateRouteOptions<T extends FlatIdempotencyRouteOptions>(
  options: T,
  checks = ROUTE_CHECKS,
): T {
  const checked: Record<string, unknown> = { ...options };
  for (const [option, checkOne] of Object.entries(checks)) {
    if (option in checked) checked[option] = checkOne(checked[option], option);
  }
  return checked as T;
}

const WAIT_FIELDS = ['maxSeconds', 'defaultSeconds', 'pollIntervalSeconds'] as const;

/**
 * Checks the `wait` fields that are present (a route's may name only some) and refuses any other.
 * @returns a copy, numbers from the environment converted
 */
export function checkWait(given: unknown): Partial<IdempotencyWaitOptions> {
  const fix =
    'Use an object such as { maxSeconds: 10 }, or leave it out (no waiting: 409 at once).';
  check(typeof given === 'object' && given !== null && !Array.isArray(given), 'wait', given, fix);
  const wait: Record<string, unknown> = { ...(given as object) };
  const unknown = Object.keys(wait).find(
    (name) => !(WAIT_FIELDS as readonly string[]).includes(name),
  );
  check(unknown === undefined, `wait.${unknown}`, wait[unknown!], `Use ${WAIT_FIELDS.join(', ')}.`);
  for (const field of WAIT_FIELDS) {
    if (wait[field] !== undefined) wait[field] = ranged(wait[field], `wait.${field}`);
  }
  return wait as Partial<IdempotencyWaitOptions>;
}
