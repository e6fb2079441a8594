import { createSecretKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { check } from './option-groups';

/**
 * One key of `encryption.keys`: an id kept on every record it seals, and its 32-byte secret.
 * @inline
 */
export interface IdempotencyEncryptionKey {
  /**
   * Names the key on the records it seals, so it can be found again after a rotation: 1 to 64
   * characters of `A-Z a-z 0-9 . _ ~ -`, unique in `keys` (e.g. `"2026-01"`). Not secret.
   */
  id: string;
  /**
   * The AES-256 key: exactly 32 bytes, as a `Buffer` / `Uint8Array` or as the base64 text of 32
   * random bytes (`openssl rand -base64 32`). Read it from a secret store or the environment;
   * it is never logged.
   */
  secret: string | Uint8Array;
}

/**
 * Encryption at rest of what a record keeps of a request: stored responses (headers and body)
 * and the input and carried state of operations in phases.
 * @inline
 */
export interface IdempotencyEncryptionOptions {
  /**
   * The first key seals every new record; every key opens the records sealed with it. To rotate,
   * put a new key first and keep the old one after it until its records have expired.
   */
  keys: IdempotencyEncryptionKey[];
  /**
   * Until this time (by the instance's clock), records stored in the clear — before encryption
   * was turned on — are still read as they were stored; from then on, and when it is left out,
   * a record without a seal is refused (500 `idempotency_record_unreadable`), as nothing in a
   * row can vouch for it. Set it to when the last instance turned encryption on plus your
   * longest `ttlSeconds` (and, with operations in phases, `maxAgeSeconds`). A `Date`, or ISO
   * 8601 text (e.g. `"2026-03-01T00:00:00Z"`).
   * @defaultValue none: no record is read in the clear while encryption is on
   */
  plaintextUntil?: Date | string | null;
}

/**
 * `encryption` once validated: each secret held as a `KeyObject`, which prints and serialises
 * without its bytes.
 * @inline
 */
export interface ResolvedIdempotencyEncryption {
  /** The keys in the order given: the first seals. */
  readonly keys: ReadonlyArray<{ readonly id: string; readonly secret: KeyObject }>;
  /** Until when (epoch milliseconds) a record stored in the clear is read; null: never. */
  readonly plaintextUntil: number | null;
}

const KEY_ID = /^[A-Za-z0-9._~-]{1,64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const KEY_BYTES = 32;
const MAKE_ONE = `Use ${KEY_BYTES} random bytes, as a Buffer or in base64 (make one with: openssl rand -base64 32).`;

/** What a secret was, said without its bytes. */
function describeSecret(secret: unknown): string {
  if (typeof secret === 'string') {
    const text = secret.trim();
    if (!BASE64.test(text)) return `a string of ${secret.length} characters that is not base64`;
    return `a base64 string of ${Buffer.from(text, 'base64').length} bytes`;
  }
  if (secret instanceof Uint8Array) return `${secret.constructor.name} of ${secret.length} bytes`;
  if (secret === undefined || secret === null) return 'no secret';
  return /^[aeiou]/.test(typeof secret) ? `an ${typeof secret}` : `a ${typeof secret}`;
}

/** The 32 bytes of a secret, or undefined when it is not 32 bytes (nor base64 text of them). */
function secretBytes(secret: unknown): Buffer | undefined {
  if (secret instanceof Uint8Array) {
    return secret.length === KEY_BYTES ? Buffer.from(secret) : undefined;
  }
  if (typeof secret !== 'string') return undefined;
  // Environment values often end with a newline: surrounding spaces are not part of base64.
  const text = secret.trim();
  const bytes = Buffer.from(text, 'base64');
  // Canonical base64 only, so a typo is not silently decoded to other bytes.
  const canonical = bytes.toString('base64').replace(/=+$/, '') === text.replace(/=+$/, '');
  return BASE64.test(text) && canonical && bytes.length === KEY_BYTES ? bytes : undefined;
}

/**
 * Validates the `encryption` option at bootstrap: at least one key, ids unique tokens, every
 * secret exactly 32 bytes. A refusal names the key by its id and says what its secret was (a
 * string of how many bytes, say), never the secret.
 *
 * @param given - the option as passed to `forRoot()`; `undefined` or `null` turn encryption off
 * @returns the keys, each secret as a `KeyObject`; `null` when encryption is off
 * @throws IdempotencyConfigurationError naming the key and how to fix it
 */
export function resolveEncryptionOptions(given: unknown): ResolvedIdempotencyEncryption | null {
  if (given === undefined || given === null) return null;
  const keys = (given as { keys?: unknown } | undefined)?.keys;
  check(
    typeof given === 'object' && Array.isArray(keys) && keys.length > 0,
    'encryption',
    // Described, not shown: a secret pasted in the wrong place must not reach a log.
    typeof given !== 'object'
      ? describeSecret(given)
      : `{ keys: ${Array.isArray(keys) ? '[]' : describeSecret(keys)} }`,
    'Use { keys: [{ id: "2026-01", secret: process.env.IDEMPOTENCY_KEY }] }, or null to store ' +
      `records unencrypted. ${MAKE_ONE}`,
  );
  const seen = new Set<string>();
  const resolved = (keys as unknown[]).map((entry, index) => {
    const { id, secret } = (entry ?? {}) as { id?: unknown; secret?: unknown };
    check(
      typeof id === 'string' && KEY_ID.test(id),
      `encryption.keys[${index}].id`,
      id,
      'Use 1 to 64 characters of A-Z a-z 0-9 . _ ~ - (e.g. "2026-01"): the id is kept on every ' +
        'record the key seals, so that it is found again after a rotation.',
    );
    check(
      !seen.has(id as string),
      `encryption.keys[${index}].id`,
      id,
      'Give every key its own id: records name the key that sealed them by it.',
    );
    seen.add(id as string);
    const bytes = secretBytes(secret);
    check(
      bytes !== undefined,
      `encryption.keys[${index}].secret (key "${id as string}")`,
      describeSecret(secret),
      MAKE_ONE,
    );
    return Object.freeze({ id: id as string, secret: createSecretKey(bytes!) });
  });
  const plaintextUntil = resolvePlaintextUntil(
    (given as { plaintextUntil?: unknown }).plaintextUntil,
  );
  return Object.freeze({ keys: Object.freeze(resolved), plaintextUntil });
}

/** `encryption.plaintextUntil` as epoch milliseconds; null when it is left out. */
function resolvePlaintextUntil(given: unknown): number | null {
  if (given === undefined || given === null) return null;
  const at =
    given instanceof Date
      ? given.getTime()
      : typeof given === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(given)
        ? Date.parse(given)
        : NaN;
  check(
    Number.isFinite(at),
    'encryption.plaintextUntil',
    given,
    'Use a Date, or ISO 8601 text with a time (e.g. "2026-03-01T00:00:00Z"): until then records ' +
      'stored in the clear before encryption was turned on are still read. Leave it out to ' +
      'read none.',
  );
  return at;
}
