/**
 * normaliseScope: what a scope resolver returns becomes a scope that fits the primary key. Short
 * strings are kept, long (or hash-shaped, or unstorable) ones are hashed, numbers are their string
 * form, and anything that does not identify a caller is refused with a fix. A webhook's, a
 * message's and a mutation's scope is kept in its namespace, which no caller's scope can name.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { IdempotencyConfigurationError } from '../../lib/config/idempotency-configuration.error';
import { MAX_SCOPE_BYTES, SCOPE_HASH_PREFIX, normaliseScope } from '../../lib/utils/request-scope';
import type { IdempotencyNamespace } from '../../lib/utils/request-scope';

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
/** Any UTF-16 code unit, unpaired surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
const anyString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc.string({ unit: codeUnit, maxLength: 400 }),
  fc.string({ unit: 'grapheme-ascii', minLength: 250, maxLength: 270 }),
);

function refusal(value: unknown): IdempotencyConfigurationError {
  try {
    normaliseScope(value);
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    return error as IdempotencyConfigurationError;
  }
  throw new Error(`expected ${String(value)} to be refused`);
}

describe('normaliseScope', () => {
  it('maps undefined, null and the empty string to no scope', () => {
    expect(normaliseScope(undefined)).toBe('');
    expect(normaliseScope(null)).toBe('');
    expect(normaliseScope('')).toBe('');
  });

  it("keeps short strings as they are, and 'alice' and 'bob' apart", () => {
    expect(normaliseScope('alice')).toBe('alice');
    expect(normaliseScope('bob')).toBe('bob');
    expect(normaliseScope('alice')).not.toBe(normaliseScope('bob'));
    expect(normaliseScope('acct_1:tenant/é')).toBe('acct_1:tenant/é');
  });

  it(`keeps exactly ${MAX_SCOPE_BYTES} bytes of UTF-8 and hashes one byte more`, () => {
    expect(normaliseScope('a'.repeat(256))).toBe('a'.repeat(256));
    expect(normaliseScope('a'.repeat(257))).toBe(`sha256:${sha256('a'.repeat(257))}`);
    // Bytes, not characters: 'é' is two bytes, '💳' four.
    expect(normaliseScope('é'.repeat(128))).toBe('é'.repeat(128));
    expect(normaliseScope('é'.repeat(129))).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(normaliseScope('💳'.repeat(64))).toBe('💳'.repeat(64));
    expect(normaliseScope('💳'.repeat(64) + 'x')).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('stores the 3 KB scope of the issue as the SHA-256 of its UTF-8 bytes', () => {
    const accountId = 'acct_' + 'x'.repeat(3 * 1024);
    const scope = normaliseScope(accountId);
    expect(scope).toBe(SCOPE_HASH_PREFIX + sha256(accountId));
    expect(bytes(scope)).toBe(71);
    expect(normaliseScope(accountId)).toBe(scope); // stable across requests and instances
  });

  it('hashes a short string that starts with sha256:, so it cannot pose as a hashed scope', () => {
    const long = 'y'.repeat(1000);
    const hashed = normaliseScope(long);
    expect(normaliseScope(hashed)).not.toBe(hashed);
    expect(normaliseScope(hashed)).toBe(`sha256:${sha256(hashed)}`);
    expect(normaliseScope('sha256:')).toMatch(/^sha256:[0-9a-f]{64}$/);
    // Only the exact prefix: these are ordinary scopes.
    expect(normaliseScope('sha256')).toBe('sha256');
    expect(normaliseScope('SHA256:abc')).toBe('SHA256:abc');
  });

  describe('namespaces (webhook, message, mutation)', () => {
    const namespaces: IdempotencyNamespace[] = ['webhook', 'message', 'mutation'];

    it('keeps the transport’s scope after its namespace: as webhook and message records were', () => {
      expect(normaliseScope('stripe', 'webhook')).toBe('webhook:stripe');
      expect(normaliseScope('orders.create', 'message')).toBe('message:orders.create');
      expect(normaliseScope('acct_1', 'mutation')).toBe('mutation:acct_1');
      expect(normaliseScope(undefined, 'mutation')).toBe('mutation:');
      expect(normaliseScope(42, 'message')).toBe('message:42');
    });

    it.each(namespaces)('hashes a caller scope equal to any %s record’s scope', (namespace) => {
      for (const inner of ['stripe', '', 'acct_1', 'sha256:abc', 'webhook:stripe']) {
        const encoded = normaliseScope(inner, namespace);
        expect(normaliseScope(encoded)).toBe(`sha256:${sha256(encoded)}`);
        for (const other of namespaces)
          expect(normaliseScope(encoded)).not.toBe(normaliseScope(inner, other));
      }
      // Only the exact, lower-case prefix is reserved.
      expect(normaliseScope(namespace)).toBe(namespace);
      expect(normaliseScope(`${namespace.toUpperCase()}:x`)).toBe(`${namespace.toUpperCase()}:x`);
    });

    it('never lets one namespace, or a caller, name another’s record', () => {
      const scopes = fc.oneof(
        anyString,
        fc
          .constantFrom('webhook:', 'message:', 'mutation:', 'sha256:')
          .chain((p) => anyString.map((s) => p + s)),
      );
      const where = fc.constantFrom<IdempotencyNamespace | undefined>(undefined, ...namespaces);
      fc.assert(
        fc.property(scopes, where, scopes, where, (a, x, b, y) => {
          fc.pre(a !== b || x !== y);
          expect(normaliseScope(a, x)).not.toBe(normaliseScope(b, y));
        }),
        { numRuns: 1000 },
      );
    });

    it(`stays within ${MAX_SCOPE_BYTES} bytes: a long scope is hashed after its namespace`, () => {
      const room = MAX_SCOPE_BYTES - 'mutation:'.length;
      expect(normaliseScope('m'.repeat(room), 'mutation')).toBe(`mutation:${'m'.repeat(room)}`);
      const over = 'm'.repeat(room + 1);
      expect(normaliseScope(over, 'mutation')).toBe(`mutation:sha256:${sha256(over)}`);
      fc.assert(
        fc.property(anyString, fc.constantFrom(...namespaces), (text, namespace) => {
          expect(bytes(normaliseScope(text, namespace))).toBeLessThanOrEqual(MAX_SCOPE_BYTES);
        }),
        { numRuns: 300 },
      );
    });
  });

  it('hashes what PostgreSQL text cannot hold as it is (NUL, unpaired surrogates), keeping them apart', () => {
    expect(normaliseScope('a\0b')).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(normaliseScope('a\0b')).not.toBe(normaliseScope('a\0c'));
    // The driver would send both as U+FFFD: as stored scopes they would be one caller.
    expect(normaliseScope('\uD800')).toMatch(/^sha256:/);
    expect(normaliseScope('\uD800')).not.toBe(normaliseScope('\uDBFF'));
    expect(normaliseScope('\uD800')).not.toBe(normaliseScope('\uFFFD'));
    expect(normaliseScope('\uFFFD')).toBe('\uFFFD');
    const long = 'z'.repeat(300);
    expect(normaliseScope(long + '\uD800')).not.toBe(normaliseScope(long + '\uFFFD'));
    // A paired surrogate is an ordinary character.
    expect(normaliseScope('\uD83D\uDCB3')).toBe('💳');
  });

  it('takes a number or a bigint as its string form', () => {
    expect(normaliseScope(42)).toBe('42');
    expect(normaliseScope(42)).toBe(normaliseScope('42'));
    expect(normaliseScope(-0)).toBe('0');
    expect(normaliseScope(1.5)).toBe('1.5');
    expect(normaliseScope(12345678901234567890n)).toBe('12345678901234567890');
    expect(normaliseScope(10n ** 300n)).toBe(`sha256:${sha256(String(10n ** 300n))}`);
  });

  it.each<[string, unknown, string]>([
    ['an object', { id: 'secret-id' }, 'an object'],
    ['an object without a prototype', Object.create(null), 'an object'],
    ['a Date', new Date(0), 'an object (Date)'],
    ['a boxed string', new String('acct_1'), 'an object (String)'],
    ['an array', ['acct_1', 'acct_2'], 'an array'],
    ['a boolean', true, 'a boolean'],
    ['a symbol', Symbol('acct'), 'a symbol'],
    ['a function', () => 'acct_1', 'a function'],
    ['NaN', NaN, 'the number NaN'],
    ['Infinity', Infinity, 'the number Infinity'],
    ['-Infinity', -Infinity, 'the number -Infinity'],
  ])('refuses %s with a configuration error that names the fix', (_label, value, described) => {
    const { message } = refusal(value);
    expect(message).toContain(`the scope resolver returned ${described};`);
    expect(message).toMatch(/return a string \(or a number\) that identifies the caller/);
    expect(message).toContain('scope: (req) => String(req.user.id)');
    expect(message).not.toContain('secret-id');
  });

  describe('properties', () => {
    it(`never returns more than ${MAX_SCOPE_BYTES} bytes of UTF-8`, () => {
      fc.assert(
        fc.property(anyString, (text) => {
          expect(bytes(normaliseScope(text))).toBeLessThanOrEqual(MAX_SCOPE_BYTES);
        }),
        { numRuns: 500 },
      );
    });

    it('maps distinct strings to distinct scopes, long ones included', () => {
      const prefix = 'p'.repeat(MAX_SCOPE_BYTES);
      fc.assert(
        fc.property(anyString, anyString, fc.boolean(), (a, b, long) => {
          fc.pre(a !== b);
          const [x, y] = long ? [prefix + a, prefix + b] : [a, b];
          expect(normaliseScope(x)).not.toBe(normaliseScope(y));
        }),
        { numRuns: 500 },
      );
    });

    it('maps distinct long strings to distinct hashed scopes', () => {
      fc.assert(
        fc.property(
          fc.string({ unit: 'binary', minLength: 257, maxLength: 600 }),
          fc.string({ unit: 'binary', minLength: 257, maxLength: 600 }),
          (a, b) => {
            fc.pre(a !== b);
            expect(normaliseScope(a)).toMatch(/^sha256:[0-9a-f]{64}$/);
            expect(normaliseScope(a)).not.toBe(normaliseScope(b));
          },
        ),
        { numRuns: 200 },
      );
    });

    it('is the same on every call', () => {
      fc.assert(
        fc.property(anyString, (text) => {
          expect(normaliseScope(text)).toBe(normaliseScope(text));
        }),
        { numRuns: 200 },
      );
    });

    it('keeps a short well-formed string that does not start with sha256: as it is', () => {
      fc.assert(
        fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), (text) => {
          fc.pre(!text.startsWith(SCOPE_HASH_PREFIX) && !text.includes('\0'));
          fc.pre(!/^(webhook|message|mutation):/.test(text));
          fc.pre(bytes(text) <= MAX_SCOPE_BYTES);
          expect(normaliseScope(text)).toBe(text);
        }),
        { numRuns: 300 },
      );
    });

    it('takes every finite number and every bigint as its string form', () => {
      fc.assert(
        fc.property(
          fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.bigInt()),
          (n) => {
            expect(normaliseScope(n)).toBe(String(n));
            expect(normaliseScope(n)).toBe(normaliseScope(String(n)));
          },
        ),
        { numRuns: 300 },
      );
    });
  });
});
