import { createHash } from 'node:crypto';
import { IdempotencyConfigurationError } from '../errors/idempotency-configuration.error';

/**
 * Longest scope, in bytes of UTF-8, stored as it is. The scope is part of the table's primary
 * key, and a btree entry over about 2700 bytes fails every insert; longer scopes are hashed.
 */
export const MAX_SCOPE_BYTES = 256;

/** Prefix of a hashed scope. A scope that starts with it is always hashed, so none collides. */
export const SCOPE_HASH_PREFIX = 'sha256:';

/** A UTF-16 surrogate without its other half: not valid UTF-8, so not storable as `text`. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The bytes hashed for a scope: its UTF-8, and for a string with unpaired surrogates their
 * generalised UTF-8 (WTF-8) form. Unlike `Buffer.from(value)`, which turns every unpaired
 * surrogate into U+FFFD, this keeps two different strings apart.
 */
function scopeBytes(value: string): Buffer {
  if (!LONE_SURROGATE.test(value)) return Buffer.from(value, 'utf8');
  const chunks: Buffer[] = [];
  // for...of walks code points; an unpaired surrogate comes out on its own.
  for (const char of value) {
    const code = char.codePointAt(0)!;
    chunks.push(
      code >= 0xd800 && code <= 0xdfff
        ? Buffer.from([0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)])
        : Buffer.from(char, 'utf8'),
    );
  }
  return Buffer.concat(chunks);
}

/** Whether a scope can be stored as it is: short, valid UTF-8 without NUL, not hash-shaped. */
function storedAsIs(scope: string): boolean {
  return (
    scope.length <= MAX_SCOPE_BYTES &&
    !scope.startsWith(SCOPE_HASH_PREFIX) &&
    !scope.includes('\0') &&
    !LONE_SURROGATE.test(scope) &&
    Buffer.byteLength(scope, 'utf8') <= MAX_SCOPE_BYTES
  );
}

/** What a refused scope was, for the error message; never the value itself. */
function describe(value: unknown): string {
  if (typeof value === 'number') return `the number ${String(value)}`;
  if (typeof value === 'boolean') return 'a boolean';
  if (typeof value === 'symbol') return 'a symbol';
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  const name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)
    ?.constructor?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object'
    ? `an object (${name})`
    : 'an object';
}

/**
 * Turns what a `scope` resolver returned into the scope stored on the record.
 *
 * - `undefined` and `null` are no scope: `''`.
 * - A string is itself when it is at most `MAX_SCOPE_BYTES` (256) bytes of UTF-8. A longer one,
 *   one that starts with `sha256:`, or one PostgreSQL `text` cannot hold as it is (a NUL
 *   character, an unpaired surrogate) becomes `sha256:` and the hex SHA-256 of its bytes, so any
 *   scope fits the primary key and two different scopes stay two different scopes.
 * - A finite number or a bigint is its string form (`42` and `'42'` are the same scope), then the
 *   same rule.
 * - Anything else (an object, an array, a boolean, a symbol, a function, NaN, Infinity) does not
 *   identify a caller and is refused.
 *
 * @param value - what the resolver returned
 * @returns the scope, at most 256 bytes of UTF-8
 * @throws IdempotencyConfigurationError (`invalidScope`) for a value that is not a string, a
 *   finite number, a bigint, `null` or `undefined`; the message says how to fix the resolver
 * @example
 * ```ts
 * normaliseScope(42); // '42'
 * normaliseScope('acct_1'); // 'acct_1'
 * normaliseScope('x'.repeat(3000)); // 'sha256:…' (71 characters)
 * ```
 */
export function normaliseScope(value: unknown): string {
  if (value === undefined || value === null) return '';
  let scope: string;
  if (typeof value === 'string') scope = value;
  else if (typeof value === 'bigint' || (typeof value === 'number' && Number.isFinite(value))) {
    scope = String(value);
  } else throw IdempotencyConfigurationError.invalidScope(describe(value));
  if (storedAsIs(scope)) return scope;
  return SCOPE_HASH_PREFIX + createHash('sha256').update(scopeBytes(scope)).digest('hex');
}
