import { check } from './option-groups';
import type { IdempotencyOptionLimit } from './option-limits';

/** A decimal number as written in an environment variable: `3`, `-0.5`, `1e3`. */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i;

/**
 * An option read from the environment (through `ConfigService`, say) arrives as a string even
 * when typed as a number or a boolean: the value a string stands for, or `undefined` when it
 * stands for none, with the sentence the refusal then ends with. Any other value is itself.
 */
function fromEnvironment(given: unknown, parse: (text: string) => unknown, expected: string) {
  if (typeof given !== 'string') return { value: given, hint: '' };
  const hint = ` (environment values are strings: ${JSON.stringify(given)} is not ${expected})`;
  return { value: parse(given.trim()), hint };
}

/**
 * Refuses a value of a numeric option outside its range (one of `OPTION_LIMITS`, or one kept
 * elsewhere, as the TypeORM store's options are; NaN, Infinity and non-numbers included), with a
 * message that gives the range and an example. A string holding a decimal number (from the
 * environment) is taken as that number. Internal.
 * @returns the value as a number
 */
export function checkNumber(option: string, given: unknown, range: IdempotencyOptionLimit): number {
  const { min, max, integer, unit, example, note } = range;
  const number = (text: string) => (DECIMAL.test(text) ? Number(text) : undefined);
  const { value, hint } = fromEnvironment(given, number, 'a number');
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= min &&
    value <= max &&
    (!integer || Number.isInteger(value));
  const kind = integer ? `a whole number of ${unit}` : `a number of ${unit}`;
  const fix = `Use ${kind} from ${min} to ${max}, e.g. ${example}.${note ? ` ${note}` : ''}`;
  check(ok, option, given, value === undefined ? fix + hint : fix);
  return value as number;
}

/**
 * Refuses a value of a boolean option that is not a boolean. The strings `"true"` and `"false"`
 * (from the environment, any case) are taken as the booleans they name.
 * @returns the value as a boolean
 */
export function checkBoolean(option: string, given: unknown, fix = 'Use true or false.'): boolean {
  const words: Record<string, boolean> = { true: true, false: false };
  const { value, hint } = fromEnvironment(given, (t) => words[t.toLowerCase()], 'true or false');
  check(typeof value === 'boolean', option, given, `${fix}${hint}`);
  return value as boolean;
}
