/**
 * canonicalJson (docs/design/contract.md#the-fingerprint): key order never changes the text, the text parses back to the same
 * JSON value, two values share a text exactly when they are equal (numbers as the doubles
 * JSON.parse gives, so `1.0` is `1` and `1e400` is not `null`), very deep nesting does not
 * overflow the stack, and own `__proto__` keys are kept as members. Elsewhere it follows
 * JSON.stringify.
 */
import fc from 'fast-check';
import { canonicalJson } from '../../lib/utils/canonical-json';
import { jsonEqual } from '../shared/json-equality';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A copy with every object's keys inserted in a seed-determined order (own `__proto__` safe). */
function shuffleKeys(value: Json, seed: number): Json {
  let state = seed >>> 0 || 1;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state;
  };
  const walk = (v: Json): Json => {
    if (v === null || typeof v !== 'object') return v;
    if (Array.isArray(v)) return v.map(walk);
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i > 0; i--) {
      const j = next() % (i + 1);
      [keys[i], keys[j]] = [keys[j], keys[i]];
    }
    const out: Record<string, Json> = {};
    for (const k of keys) {
      Object.defineProperty(out, k, {
        value: walk(v[k]),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  };
  return walk(value);
}

const json = fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<Json>;
/** Objects with few distinct keys, so that near-identical pairs come up often. */
const smallJson: fc.Arbitrary<Json> = fc.letrec<{ v: Json }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom<Json>(null, true, false, 0, 1, -1, 1.5, '', 'a', '1', 'null', '"', '\\'),
    fc.array(tie('v'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom('a', 'b', '__proto__', '', '1', 'a"'), tie('v'), {
      maxKeys: 3,
    }),
  ),
})).v;

/** Leaves JSON.parse reads in surprising ways: overflow, underflow, -0, escapes, lone surrogates. */
const leafText = fc.constantFrom(
  '0',
  '-0',
  '0.0',
  '1',
  '1.0',
  '1e0',
  '1e308',
  '1e400',
  '-1e400',
  '2e400',
  '1e-400',
  '5e-324',
  '9007199254740992',
  '9007199254740993',
  'null',
  'true',
  '"a"',
  '"\\u0061"',
  '"\\ud800"',
  '"\\u0000"',
  '"__proto__"',
);
/** Keys as JSON string contents, among them prototype keys and `a` spelled with an escape. */
const keyText = fc.constantFrom('a', '\\u0061', 'b', '__proto__', 'constructor', 'prototype', '');
/** Raw JSON texts over a small domain, with duplicate keys, so equal values come up often. */
const jsonText: fc.Arbitrary<string> = fc.letrec<{ t: string }>((tie) => ({
  t: fc.oneof(
    { depthSize: 'small' },
    leafText,
    fc.array(tie('t'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
    fc
      .array(fc.tuple(keyText, tie('t')), { maxLength: 4 })
      .map((entries) => `{${entries.map(([k, v]) => `"${k}":${v}`).join(',')}}`),
  ),
})).t;

describe('canonicalJson', () => {
  it('gives the same text whatever the key order', () => {
    fc.assert(
      fc.property(json, fc.integer(), (value, seed) => {
        expect(canonicalJson(shuffleKeys(value, seed))).toBe(canonicalJson(value));
      }),
      { numRuns: 300 },
    );
  });

  it('sorts keys and writes no whitespace', () => {
    const text = '{ "b": [1, {"z": 1, "a": 2}],\n  "a": "x" }';
    expect(canonicalJson(JSON.parse(text))).toBe('{"a":"x","b":[1,{"a":2,"z":1}]}');
  });

  it('parses back to the same JSON value', () => {
    fc.assert(
      fc.property(fc.oneof(json, smallJson), (value) => {
        expect(jsonEqual(JSON.parse(canonicalJson(value)), value)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('never gives two different values the same text', () => {
    fc.assert(
      fc.property(fc.oneof(json, smallJson), fc.oneof(json, smallJson), (a, b) => {
        fc.pre(!jsonEqual(a, b));
        expect(canonicalJson(a)).not.toBe(canonicalJson(b));
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(smallJson, smallJson, (a, b) => {
        fc.pre(!jsonEqual(a, b));
        expect(canonicalJson(a)).not.toBe(canonicalJson(b));
      }),
      { numRuns: 1000 },
    );
  });

  it.each<[Json, Json]>([
    [{ a: 1 }, { a: '1' }],
    [['a,b'], ['a', 'b']],
    [{ 'a":1,"b': 2 }, { a: 1, b: 2 }],
    [{ a: null }, {}],
    [[null], []],
    ['', null],
    [{ a: { b: 1 } }, { 'a.b': 1 }],
  ])('tells %j from %j', (a, b) => {
    expect(canonicalJson(a)).not.toBe(canonicalJson(b));
  });

  it('handles nesting 100000 deep without overflowing the stack', () => {
    const depth = 100_000;
    let array: Json = 0;
    let object: Json = 0;
    for (let i = 0; i < depth; i++) {
      array = [array];
      object = { a: object };
    }
    expect(canonicalJson(array)).toBe(`${'['.repeat(depth)}0${']'.repeat(depth)}`);
    expect(canonicalJson(object)).toBe(`${'{"a":'.repeat(depth)}0${'}'.repeat(depth)}`);
  });

  // Three writers share the work (JSON.stringify for plain values whose keys are in order, a
  // recursive one, a stack-based one past 64 levels): each must give what the others would.
  it('gives the same text with keys in order or not, at every depth around where writers change', () => {
    for (let depth = 1; depth <= 70; depth++) {
      let inOrder: Json = [1, 'x'];
      let reversed: Json = [1, 'x'];
      for (let i = 0; i < depth; i++) {
        inOrder = i % 3 === 2 ? [inOrder, 2] : { a: inOrder, b: i };
        reversed = i % 3 === 2 ? [reversed, 2] : { b: i, a: reversed };
      }
      const text = canonicalJson(inOrder);
      expect(canonicalJson(reversed)).toBe(text);
      expect(JSON.parse(text)).toEqual(inOrder);
    }
  });

  it('writes a class instance by the same rules whatever the key order (a boxed number, say)', () => {
    const boxed = { a: Object(1) as Json, b: 2 };
    expect(canonicalJson(boxed)).toBe(canonicalJson({ b: 2, a: Object(1) as Json }));
    expect(canonicalJson({ a: 1, b: 2 })).toBe('{"a":1,"b":2}');
  });

  it('handles 100000 levels of arrays and objects with prototype keys, as JSON.parse gives them', () => {
    const half = 50_000;
    const text = `${'[{"__proto__":'.repeat(half)}0${'}]'.repeat(half)}`;
    expect(canonicalJson(JSON.parse(text))).toBe(text);
    const other = `${'[{"__proto__":'.repeat(half)}1${'}]'.repeat(half)}`;
    expect(canonicalJson(JSON.parse(other))).not.toBe(text);
  });

  it('gives two parsed JSON texts the same text exactly when their values are equal', () => {
    fc.assert(
      fc.property(jsonText, jsonText, (s, t) => {
        const [a, b] = [JSON.parse(s), JSON.parse(t)];
        expect(canonicalJson(a) === canonicalJson(b)).toBe(jsonEqual(a, b));
      }),
      { numRuns: 3000 },
    );
  });

  it('writes text that parses back to the same value, prototype keys and overflows included', () => {
    fc.assert(
      fc.property(jsonText, (s) => {
        const value = JSON.parse(s);
        const back = JSON.parse(canonicalJson(value));
        expect(jsonEqual(back, value)).toBe(true);
        expect(canonicalJson(back)).toBe(canonicalJson(value));
      }),
      { numRuns: 1000 },
    );
    expect(Object.prototype).not.toHaveProperty('a');
  });

  it('keeps own __proto__ keys', () => {
    const value = JSON.parse('{"b":2,"__proto__":{"admin":true}}');
    expect(canonicalJson(value)).toBe('{"__proto__":{"admin":true},"b":2}');
    expect(canonicalJson(value)).not.toBe(canonicalJson({ b: 2 }));
  });

  it('treats an own __proto__ key as a member, never as the prototype', () => {
    const own = JSON.parse('{"__proto__":{"x":1},"x":2}');
    const inherited = Object.assign(Object.create({ x: 1 }), { x: 2 });
    expect(canonicalJson(own)).toBe('{"__proto__":{"x":1},"x":2}');
    // Inherited members are not part of a JSON value (as with JSON.stringify).
    expect(canonicalJson(inherited)).toBe('{"x":2}');
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const withKey = JSON.parse(`{"z":1,"${key}":{}}`);
      expect(canonicalJson(withKey)).toBe(`{"${key}":{},"z":1}`);
      expect(canonicalJson(withKey)).not.toBe(canonicalJson({ z: 1 }));
      expect(canonicalJson(withKey)).not.toBe(canonicalJson(JSON.parse(`{"${key}":[],"z":1}`)));
    }
  });

  it('follows JSON.stringify for undefined, functions, NaN, -0 and toJSON', () => {
    const value = {
      u: undefined,
      f: () => 1,
      list: [undefined, () => 1, NaN, -0],
      when: new Date('2026-01-02T03:04:05.000Z'),
      s: 'é\u2028"',
    };
    expect(canonicalJson(value)).toBe(
      JSON.stringify({
        list: value.list,
        s: value.s,
        when: value.when,
      }),
    );
    expect(canonicalJson(undefined)).toBe(JSON.stringify(null));
  });

  // Regression: JSON.parse turns a number too large for a double (`1e400`) into Infinity, and
  // JSON.stringify writes Infinity as null, so `{"a":1e400}`, `{"a":-1e400}` and `{"a":null}`
  // shared one fingerprint: the second request got the first one's stored response instead
  // of 422. The handler does see three different values.
  it('tells an overflowing number from null and keeps its sign, as text that parses back', () => {
    const [big, negative, nil] = ['{"a":1e400}', '{"a":-1e400}', '{"a":null}'].map((t) =>
      canonicalJson(JSON.parse(t)),
    );
    expect(new Set([big, negative, nil]).size).toBe(3);
    expect(JSON.parse(big)).toEqual({ a: Infinity });
    expect(JSON.parse(negative)).toEqual({ a: -Infinity });
    expect(canonicalJson(JSON.parse('[1e400, 2e400]'))).toBe(canonicalJson([Infinity, Infinity]));
    expect(canonicalJson(1.7976931348623157e308)).not.toBe(canonicalJson(Infinity));
  });

  it('throws a TypeError for a BigInt, as JSON.stringify does', () => {
    expect(() => canonicalJson({ n: BigInt(1) })).toThrow(TypeError);
  });
});
