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
 * formatting never change the result. Works iteratively: deep nesting cannot overflow the stack.
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
