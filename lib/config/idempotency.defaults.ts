import { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';
import { flattenOptionGroups } from './option-groups';
import {
  checkWait,
  MODULE_CHECKS,
  validateRouteOptions,
  withoutUndefined,
} from './option-validation';
import type {
  FlatIdempotencyRouteOptions,
  IdempotencyWaitOptions,
  IdempotencyModuleOptions,
  ResolvedIdempotencyRouteOptions,
  IdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';

// The defaults, the option ranges and checks live in default-options.ts, option-limits.ts,
// option-checks.ts and option-validation.ts; re-exported here, where the rest of lib/
// (and the package root) imports them from.
export { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';
export { checkBoolean, checkNumber } from './option-checks';
export { count, OPTION_LIMITS, seconds } from './option-limits';
export type { IdempotencyLimitedOption, IdempotencyOptionLimit } from './option-limits';
export { switchableSection, validateRouteOptions, withoutUndefined } from './option-validation';
export { check, flattenOptionGroups, optionPlace } from './option-groups';

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
  const given = withoutUndefined(flattenOptionGroups(options, 'module'));
  const resolved = validateRouteOptions({ ...RESOLVED_DEFAULTS, ...given }, MODULE_CHECKS);
  return { ...resolved, wait: mergeWait(RESOLVED_DEFAULTS.wait, resolved.wait) };
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
    for (const [k, v] of Object.entries(layer ?? {})) {
      if (k === 'wait') merged.wait = mergeWait(merged.wait, v);
      else if (v !== undefined) merged[k] = v;
    }
  }
  return merged;
}
