import { createHash } from 'node:crypto';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';

/**
 * Longest scope, in bytes of UTF-8, stored as it is. The scope is part of the table's primary
 * key, and a btree entry over about 2700 bytes fails every insert; longer scopes are hashed.
 */
export const MAX_SCOPE_BYTES = 256;

/** Prefix of a hashed scope. A scope that starts with it is always hashed, so none collides. */
export const SCOPE_HASH_PREFIX = 'sha256:';

/**
 * The namespaces of records that are not an HTTP route's: a webhook provider's events, messages
 * and events, GraphQL mutations. Each record's stored scope starts with its namespace and `:`.
 */
export type IdempotencyNamespace = 'webhook' | 'message' | 'mutation';

/**
 * What only the library writes at the start of a stored scope: a hash, or a namespace. A
 * caller's scope (what a `scope` resolver returns for an HTTP route) that starts with one is
 * hashed, so it can never name a webhook's, a message's or a mutation's record.
 */
const RESERVED: readonly string[] = [SCOPE_HASH_PREFIX, 'webhook:', 'message:', 'mutation:'];

/** Only the hash prefix is reserved inside a namespace: its own prefix already sets it apart. */
const RESERVED_IN_NAMESPACE: readonly string[] = [SCOPE_HASH_PREFIX];

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

/** What a refused scope was, for the error message; never the value itself. */
function describe(value: unknown): string {
  if (typeof value === 'number') return `the number ${String(value)}`;
  // A boolean, a symbol or a function: strings, bigints and nothing never get here.
  if (typeof value !== 'object') return `a ${typeof value}`;
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
 *   one that starts with a reserved prefix (`sha256:`, `webhook:`, `message:`, `mutation:`), or
 *   one PostgreSQL `text` cannot hold as it is (a NUL character, an unpaired surrogate) becomes
 *   `sha256:` and the hex SHA-256 of its bytes, so any scope fits the primary key, two different
 *   scopes stay two different scopes, and no caller's scope names another namespace's record.
 * - A finite number or a bigint is its string form (`42` and `'42'` are the same scope), then the
 *   same rule.
 * - Anything else (an object, an array, a boolean, a symbol, a function, NaN, Infinity) does not
 *   identify a caller and is refused.
 *
 * With a `namespace` (a webhook route, a message, a mutation), the stored scope is the namespace,
 * `:`, and the scope under the same rule within what is left of the 256 bytes (only `sha256:` is
 * reserved there). An HTTP route's scope never starts with a namespace, so the two never meet.
 *
 * @param value - what the resolver returned
 * @param namespace - the namespace of a record that is not an HTTP route's
 * @returns the scope, at most 256 bytes of UTF-8
 * @throws IdempotencyConfigurationError (`invalidScope`) for a value that is not a string, a
 *   finite number, a bigint, `null` or `undefined`; the message says how to fix the resolver
 * @example
 * ```ts
 * normaliseScope(42); // '42'
 * normaliseScope('acct_1'); // 'acct_1'
 * normaliseScope('x'.repeat(3000)); // 'sha256:…' (71 characters)
 * normaliseScope('webhook:stripe'); // 'sha256:…': a caller's scope is never a namespace
 * normaliseScope('stripe', 'webhook'); // 'webhook:stripe'
 * ```
 */
export function normaliseScope(value: unknown, namespace?: IdempotencyNamespace): string {
  let scope: string;
  if (value === undefined || value === null) scope = '';
  else if (typeof value === 'string') scope = value;
  else if (typeof value === 'bigint' || (typeof value === 'number' && Number.isFinite(value))) {
    scope = String(value);
  } else throw IdempotencyConfigurationError.invalidScope(describe(value));
  if (namespace === undefined) return bounded(scope, MAX_SCOPE_BYTES, RESERVED);
  const prefix = `${namespace}:`;
  return prefix + bounded(scope, MAX_SCOPE_BYTES - prefix.length, RESERVED_IN_NAMESPACE);
}

/** The scope as it is when it can be stored so, else `sha256:` and the hash of its bytes. */
function bounded(scope: string, maxBytes: number, reserved: readonly string[]): string {
  // At most `maxBytes`, valid UTF-8 without NUL, and not starting with a reserved prefix.
  const storedAsIs =
    scope.length <= maxBytes &&
    !reserved.some((prefix) => scope.startsWith(prefix)) &&
    !scope.includes('\0') &&
    !LONE_SURROGATE.test(scope) &&
    Buffer.byteLength(scope, 'utf8') <= maxBytes;
  if (storedAsIs) return scope;
  return SCOPE_HASH_PREFIX + createHash('sha256').update(scopeBytes(scope)).digest('hex');
}
