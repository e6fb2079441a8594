/** A piece of output text waiting on the work stack. */
class Literal {
  constructor(readonly text: string) {}
}

function isSkipped(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

/** A number as JSON text; ±Infinity (from `JSON.parse('1e400')`) as a number that reads back. */
function numberText(n: number): string {
  if (Number.isFinite(n)) return JSON.stringify(n);
  if (Number.isNaN(n)) return 'null';
  return n > 0 ? '1e999' : '-1e999';
}

/**
 * Serialises a JSON value with object keys sorted, without whitespace, so that key order and
 * formatting never change the result. Deep nesting cannot overflow the stack: past 64 levels
 * the value is written with a work stack instead of recursion.
 * Follows `JSON.stringify` for everything else (`toJSON`, `undefined` members skipped, `NaN` as
 * `null`, `-0` as `0`) except one case: `JSON.parse` reads a number too large for a double
 * (`1e400`) as `Infinity`, which `JSON.stringify` would write as `null`. Two different requests
 * must never share a fingerprint, so `Infinity` and `-Infinity` are written `1e999` and `-1e999`:
 * JSON numbers that parse back to the same value.
 *
 * @param value - a value as produced by `JSON.parse` (or a plain object tree)
 * @returns the canonical JSON text
 * @throws TypeError for a BigInt, as `JSON.stringify` does
 */
export function canonicalJson(value: unknown): string {
  if (value !== null && typeof value === 'object' && isWrittenAsIs(value, 0)) {
    return JSON.stringify(value);
  }
  return shallowText(value, 0) ?? deepText(value);
}

/**
 * Whether `JSON.stringify` already writes the canonical text of an object or array: every
 * object's keys are in sorted order, no number is infinite, nothing has a `toJSON`, and nothing
 * is nested deeper than `RECURSION_LIMIT`. Many clients send bodies like that; checking is
 * cheaper than writing, and `JSON.stringify` writes in one native call. Only plain objects and
 * arrays qualify.
 */
function isWrittenAsIs(value: object, depth: number): boolean {
  if (depth === RECURSION_LIMIT || typeof (value as any).toJSON === 'function') return false;
  if (Array.isArray(value)) {
    for (const item of value) if (!isLeafWrittenAsIs(item, depth)) return false;
    return true;
  }
  // A class instance (a boxed number, say) is written by its own rules: the general path.
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return false;
  let previous: string | undefined;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) return false;
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
    if (!isLeafWrittenAsIs((value as Record<string, unknown>)[key], depth)) return false;
  }
  return true;
}

function isLeafWrittenAsIs(item: unknown, depth: number): boolean {
  switch (typeof item) {
    case 'number':
      return item !== Infinity && item !== -Infinity;
    case 'object':
      return item === null || isWrittenAsIs(item, depth + 1);
    case 'bigint':
      return false;
    default:
      return true;
  }
}

/** Nesting the recursive writer handles; a deeper value is written by `deepText` instead. */
const RECURSION_LIMIT = 64;

/**
 * The canonical text of a value nested at most `RECURSION_LIMIT` deep, written recursively as
 * one string: what almost every request body is, in two thirds of `deepText`'s time or less.
 * @returns undefined when the value is nested deeper
 */
function shallowText(value: unknown, depth: number): string | undefined {
  let item = value;
  if (item !== null && typeof item === 'object' && typeof (item as any).toJSON === 'function') {
    item = (item as any).toJSON();
  }
  switch (typeof item) {
    case 'string':
      return JSON.stringify(item);
    case 'number':
      return numberText(item);
    case 'boolean':
      return item ? 'true' : 'false';
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
    case 'object':
      if (item === null) return 'null';
      break;
    default:
      return 'null';
  }
  if (depth === RECURSION_LIMIT) return undefined;
  if (Array.isArray(item)) {
    let text = '[';
    for (let i = 0; i < item.length; i++) {
      const member = shallowText(item[i], depth + 1);
      if (member === undefined) return undefined;
      text += i === 0 ? member : `,${member}`;
    }
    return `${text}]`;
  }
  const obj = item as Record<string, unknown>;
  const keys = Object.keys(obj).sort();
  let text = '{';
  let separator = '';
  for (const key of keys) {
    const raw = obj[key];
    if (isSkipped(raw)) continue;
    const member = shallowText(raw, depth + 1);
    if (member === undefined) return undefined;
    text += `${separator}${JSON.stringify(key)}:${member}`;
    separator = ',';
  }
  return `${text}}`;
}

/** The canonical text of a value nested at any depth, written with a work stack of its own. */
function deepText(value: unknown): string {
  const out: string[] = [];
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    let item = stack.pop();
    if (item instanceof Literal) {
      out.push(item.text);
      continue;
    }
    if (item !== null && typeof item === 'object' && typeof (item as any).toJSON === 'function') {
      item = (item as any).toJSON();
    }
    if (item === null || isSkipped(item)) {
      out.push('null');
    } else if (typeof item === 'number') {
      out.push(numberText(item));
    } else if (typeof item === 'string' || typeof item === 'boolean') {
      out.push(JSON.stringify(item));
    } else if (typeof item === 'bigint') {
      throw new TypeError('Do not know how to serialize a BigInt');
    } else if (Array.isArray(item)) {
      out.push('[');
      stack.push(new Literal(']'));
      for (let i = item.length - 1; i >= 0; i--) {
        stack.push(item[i]);
        if (i > 0) stack.push(new Literal(','));
      }
    } else {
      const obj = item as Record<string, unknown>;
      const keys = Object.keys(obj)
        .filter((k) => !isSkipped(obj[k]))
        .sort();
      out.push('{');
      stack.push(new Literal('}'));
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push(obj[keys[i]]);
        stack.push(new Literal(`${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:`));
      }
    }
  }
  return out.join('');
}
