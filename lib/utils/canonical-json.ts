/** A piece of output text waiting on the work stack. */
class Literal {
  constructor(readonly text: string) {}
}

function isSkipped(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

/** A value as JSON writes it: what its `toJSON()` returns, when it has one. */
function jsonValueOf(value: unknown): unknown {
  if (value !== null && typeof value === 'object' && typeof (value as any).toJSON === 'function') {
    return (value as any).toJSON();
  }
  return value;
}

/**
 * The text of a value that is neither an array nor an object; undefined for one that is.
 * @throws TypeError for a BigInt, as `JSON.stringify` does
 */
function leafText(item: unknown): string | undefined {
  if (item === null || isSkipped(item)) return 'null';
  switch (typeof item) {
    case 'number':
      if (Number.isFinite(item)) return JSON.stringify(item);
      // ±Infinity (from `JSON.parse('1e400')`) as a number that reads back.
      return Number.isNaN(item) ? 'null' : item > 0 ? '1e999' : '-1e999';
    case 'string':
    case 'boolean':
      return JSON.stringify(item);
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
    default:
      return undefined;
  }
}

/** An object's members as written: sorted keys, members JSON skips left out. */
function memberKeys(obj: Record<string, unknown>): string[] {
  return Object.keys(obj)
    .filter((k) => !isSkipped(obj[k]))
    .sort();
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
  const item = jsonValueOf(value);
  const leaf = leafText(item);
  if (leaf !== undefined) return leaf;
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
  let text = '{';
  for (const key of memberKeys(obj)) {
    const member = shallowText(obj[key], depth + 1);
    if (member === undefined) return undefined;
    text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${member}`;
  }
  return `${text}}`;
}

/** The canonical text of a value nested at any depth, written with a work stack of its own. */
function deepText(value: unknown): string {
  const out: string[] = [];
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const popped = stack.pop();
    if (popped instanceof Literal) {
      out.push(popped.text);
      continue;
    }
    const item = jsonValueOf(popped);
    const leaf = leafText(item);
    if (leaf !== undefined) {
      out.push(leaf);
    } else if (Array.isArray(item)) {
      out.push('[');
      stack.push(new Literal(']'));
      for (let i = item.length - 1; i >= 0; i--) {
        stack.push(item[i]);
        if (i > 0) stack.push(new Literal(','));
      }
    } else {
      const obj = item as Record<string, unknown>;
      const keys = memberKeys(obj);
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
