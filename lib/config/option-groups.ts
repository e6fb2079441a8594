import { DEFAULT_IDEMPOTENCY_OPTIONS } from './default-options';
import { IdempotencyConfigurationError } from './idempotency-configuration.error';

/** The groups whose fields the library reads as one flat set of route options. */
const GROUPS = ['request', 'execution', 'wait', 'responses', 'errors'] as const;

/** Fields of a group that only `forRoot()` takes: they are about the instance, not a route. */
const MODULE_ONLY = new Set(['maxWaiters', 'problemTypeBaseUri', 'errorBody']);

/** A good value of each group, shown when a group is not an object. */
const EXAMPLES: Record<string, string> = {
  request: '{ scope: (req) => req.user.accountId }',
  execution: '{ transactional: true }',
  wait: '{ maxSeconds: 10 }',
  responses: '{ ttlSeconds: 86400 }',
  errors: '{ retryAfterSeconds: 1 }',
};

/** Each grouped field's group, read from the defaults: `ttlSeconds` → `responses`. */
const GROUP_OF = new Map<string, string>(
  GROUPS.flatMap((group) =>
    Object.keys(DEFAULT_IDEMPOTENCY_OPTIONS[group]).map((field) => [field, group] as const),
  ),
);

/**
 * Where an option is written in the options object: `responses.ttlSeconds` for `ttlSeconds`.
 * A name that is not a grouped field (`wait.maxSeconds`, `purge.batchSize`) is its own. Internal.
 */
export function optionPlace(field: string): string {
  const group = GROUP_OF.get(field);
  return group === undefined ? field : `${group}.${field}`;
}

/**
 * Refuses an option's value, naming the option where it is written (`responses.ttlSeconds` for
 * `ttlSeconds`) and how to fix it. Internal (the TypeORM store's options use it too).
 * @throws IdempotencyConfigurationError when `ok` is false
 */
export function check(ok: boolean, option: string, value: unknown, fix: string): void {
  if (!ok) throw IdempotencyConfigurationError.invalidOption(optionPlace(option), value, fix);
}

/** A group's given fields, checked against the fields it has. */
function groupFields(
  group: string,
  given: unknown,
  level: 'module' | 'route',
): [string, unknown][] {
  const fields = [...GROUP_OF].filter(([, g]) => g === group).map(([field]) => field);
  const offered = fields.filter((field) => level === 'module' || !MODULE_ONLY.has(field));
  const fix = `Use an object such as ${EXAMPLES[group]} (${offered.join(', ')}), or leave it out.`;
  check(typeof given === 'object' && given !== null && !Array.isArray(given), group, given, fix);
  const entries = Object.entries(given as object);
  for (const [field, value] of entries) {
    const place = `${group}.${field}`;
    const taken = level === 'module' || !MODULE_ONLY.has(field);
    check(taken, place, value, 'It is not taken per route: set it in forRoot().');
    check(fields.includes(field), place, value, fix);
  }
  return entries;
}

/**
 * The options as the library reads them: each group's fields side by side (`wait` stays an
 * object; its `maxWaiters` joins the others). Refuses an option written where 0.1 had it, naming
 * its group, so that no setting is silently ignored.
 *
 * @param given - what `forRoot()` or a route decorator received
 * @param level - `route` refuses the fields only the module takes
 * @throws IdempotencyConfigurationError for a moved option, an unknown field of a group, or a
 *   group that is not an object
 */
export function flattenOptionGroups(
  given: object,
  level: 'module' | 'route',
): Record<string, unknown> {
  const flat: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(given)) {
    const group = GROUP_OF.get(name);
    if (group !== undefined && (group !== 'wait' || name === 'maxWaiters')) {
      throw IdempotencyConfigurationError.movedOption(name, group);
    }
    if (!(GROUPS as readonly string[]).includes(name) || value === undefined) {
      if (value !== undefined) flat[name] = value;
      continue;
    }
    const entries = groupFields(name, value, level);
    if (name !== 'wait') Object.assign(flat, Object.fromEntries(entries));
    else {
      const { maxWaiters, ...wait } = value as Record<string, unknown>;
      flat.wait = wait;
      if (maxWaiters !== undefined) flat.maxWaiters = maxWaiters;
    }
  }
  return flat;
}

/**
 * Refuses the first of `places` (`wait`, `request.header`...) that `given` sets: what a decorator
 * that does not take those options does. Internal.
 * @param fix - what the message says to do, given the place
 * @throws IdempotencyConfigurationError naming the place, its value and `fix`
 */
export function refuseOptionsSet(
  given: object,
  places: readonly string[],
  fix: (place: string) => string,
): void {
  for (const place of places) {
    const [group, field] = place.split('.');
    const inGroup: any = (given as Record<string, unknown>)[group];
    const set =
      field === undefined
        ? group in given
        : typeof inGroup === 'object' && inGroup !== null && field in inGroup;
    const value = field === undefined ? inGroup : inGroup?.[field];
    if (set) throw IdempotencyConfigurationError.invalidOption(place, value, fix(place));
  }
}
