import { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';
import { resolveEncryptionOptions } from './encryption-options';
import { check, checkBoolean, checkRange } from './option-checks';
import { flattenOptionGroups } from './option-groups';
import { checkWait, validateRouteOptions } from './route-options-validation';
import type {
  FlatIdempotencyRouteOptions,
  IdempotencyWaitOptions,
  IdempotencyModuleOptions,
  ResolvedIdempotencyRouteOptions,
  IdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';

// The defaults, the option ranges and checks live in default-options.ts, option-limits.ts,
// option-checks.ts and route-options-validation.ts; re-exported here, where the rest of lib/
// (and the package root) imports them from.
export { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';
export { check, checkBoolean, checkNumber, checkRange } from './option-checks';
export { limit, OPTION_LIMITS } from './option-limits';
export type { IdempotencyLimitedOption, IdempotencyOptionLimit } from './option-limits';
export { validateRouteOptions } from './route-options-validation';
export { flattenOptionGroups, optionPlace } from './option-groups';

/** The defaults as the library reads them: each group's fields side by side. Internal. */
export const RESOLVED_DEFAULTS = Object.freeze(
  flattenOptionGroups(DEFAULT_IDEMPOTENCY_OPTIONS, 'module'),
) as Readonly<ResolvedIdempotencyOptions>;

/**
 * Checks the options a route decorator received and returns them as the library reads them.
 * @throws IdempotencyConfigurationError naming the first wrong option and how to fix it
 */
export function validateRouteGroups(options: IdempotencyRouteOptions): FlatIdempotencyRouteOptions {
  return validateRouteOptions(flattenOptionGroups(options, 'route') as FlatIdempotencyRouteOptions);
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
  const defined = withoutUndefined(flattenOptionGroups(options, 'module')) as Partial<
    Omit<ResolvedIdempotencyOptions, 'purge' | 'replayCache' | 'encryption'>
  > &
    Pick<IdempotencyModuleOptions, 'purge' | 'replayCache' | 'encryption'>;
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
    ...RESOLVED_DEFAULTS,
    ...rest,
    wait: mergeWait(RESOLVED_DEFAULTS.wait, rest.wait),
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
 * @param layers - class options, then handler options (later wins), as the decorators stored them
 * @returns the options in force for one route
 */
export function mergeRouteOptions(
  base: ResolvedIdempotencyRouteOptions,
  ...layers: (FlatIdempotencyRouteOptions | undefined)[]
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
