/**
 * docs/design/contract.md#the-key key syntax: bare and RFC 8941 quoted forms name the same key; only `\"` and `\\` are
 * escapes; empty, too long, non-ASCII, control characters, bad escapes, unterminated or trailing
 * quotes, a bare comma and repeated header lines are invalid. `headerLines()` keeps repeated
 * lines apart whatever their case. A property checks every valid key round-trips in both forms.
 */
import fc from 'fast-check';
import { headerLines, parseIdempotencyKey } from '../../lib/utils/parse-idempotency-key';

const parse = (value: string) => parseIdempotencyKey([value]);
const quote = (key: string) => `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

describe('parseIdempotencyKey', () => {
  it('reports a missing header when there is no header line', () => {
    expect(parseIdempotencyKey([])).toEqual({ kind: 'missing' });
  });

  it('reads a bare key and the same key quoted as one key', () => {
    const id = '8e03978e-40d5-43e8-bc93-6894a57f9324';
    expect(parse(id)).toEqual({ kind: 'valid', key: id });
    expect(parse(`"${id}"`)).toEqual({ kind: 'valid', key: id });
  });

  it('trims spaces and tabs around the header value', () => {
    expect(parse('  abc\t')).toEqual({ kind: 'valid', key: 'abc' });
    expect(parse(' "abc" ')).toEqual({ kind: 'valid', key: 'abc' });
  });

  it('unescapes \\" and \\\\ inside a quoted key', () => {
    expect(parse('"a\\"b"')).toEqual({ kind: 'valid', key: 'a"b' });
    expect(parse('"a\\\\b"')).toEqual({ kind: 'valid', key: 'a\\b' });
  });

  it('accepts a comma inside a quoted key', () => {
    expect(parse('"a,b"')).toEqual({ kind: 'valid', key: 'a,b' });
  });

  it('accepts 255 characters and refuses 256', () => {
    expect(parse('k'.repeat(255))).toEqual({ kind: 'valid', key: 'k'.repeat(255) });
    expect(parse('k'.repeat(256)).kind).toBe('invalid');
    expect(parse(`"${'k'.repeat(256)}"`).kind).toBe('invalid');
  });

  it.each([
    ['empty', ''],
    ['whitespace only', '   '],
    ['quoted empty', '""'],
    ['quoted whitespace only', '"   "'],
    ['non-ASCII', 'cl\u00e9'],
    ['non-ASCII quoted', '"cl\u00e9"'],
    ['a control character', 'a\u0001b'],
    ['a tab inside', 'a\tb'],
    ['DEL', 'a\u007fb'],
    ['a bad escape \\n', '"a\\nb"'],
    ['a trailing backslash', '"ab\\"'],
    ['an unterminated quote', '"abc'],
    ['text after the closing quote', '"abc"def'],
    ['a second quoted string', '"a", "b"'],
    ['a comma in a bare value', 'a,b'],
  ])('refuses %s', (_label, value) => {
    const result = parse(value);
    expect(result.kind).toBe('invalid');
  });

  it('refuses two header lines, even with the same value', () => {
    expect(parseIdempotencyKey(['abc', 'abc']).kind).toBe('invalid');
  });

  it('never echoes the key in the reason', () => {
    const secret = 'secret-\u00e9-value';
    const result = parse(secret);
    expect(result.kind).toBe('invalid');
    if (result.kind === 'invalid') expect(result.reason).not.toContain('secret');
  });

  it('round-trips every valid key, bare and quoted', () => {
    const unit = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
    const printable = fc.string({ unit, minLength: 1, maxLength: 255 });
    const validKey = printable.filter(
      (s) => !s.includes(',') && !s.startsWith('"') && !/^ | $/.test(s),
    );
    fc.assert(
      fc.property(validKey, (key) => {
        expect(parse(key)).toEqual({ kind: 'valid', key });
        expect(parse(quote(key))).toEqual({ kind: 'valid', key });
      }),
      { numRuns: 500 },
    );
  });

  it('round-trips quoted keys that hold commas and quotes', () => {
    const chars = fc.constantFrom('a', 'Z', '9', ',', '"', '\\', ' ', '-');
    fc.assert(
      fc.property(fc.string({ unit: chars, minLength: 1, maxLength: 50 }), (raw) => {
        const key = raw.trim();
        fc.pre(key.length > 0);
        expect(parse(quote(key))).toEqual({ kind: 'valid', key });
      }),
    );
  });
});

describe('headerLines', () => {
  it('collects every line of one header, whatever the case of its name', () => {
    const raw = [
      'Host',
      'example.test',
      'idempotency-key',
      'one',
      'Content-Type',
      'application/json',
      'IDEMPOTENCY-KEY',
      'two',
    ];
    expect(headerLines(raw, 'Idempotency-Key')).toEqual(['one', 'two']);
    expect(parseIdempotencyKey(headerLines(raw, 'Idempotency-Key')).kind).toBe('invalid');
  });

  it('returns no lines when the header is absent or there are no raw headers', () => {
    expect(headerLines(['Host', 'x'], 'Idempotency-Key')).toEqual([]);
    expect(headerLines(undefined, 'Idempotency-Key')).toEqual([]);
    expect(parseIdempotencyKey(headerLines(undefined, 'Idempotency-Key'))).toEqual({
      kind: 'missing',
    });
  });

  it('keeps a value that itself contains a comma as one line', () => {
    expect(headerLines(['Idempotency-Key', '"a,b"'], 'idempotency-key')).toEqual(['"a,b"']);
  });
});
