/**
 * canonicalJson (SPEC §4): key order never changes the text, the text parses back to the same
 * JSON value, different values never share a text, very deep nesting does not overflow the
 * stack, and own `__proto__` keys are kept. Elsewhere it follows JSON.stringify.
 */
import fc from 'fast-check';
import { canonicalJson } from '../../lib/utils/canonical-json';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Equality of JSON values: numbers by `===` (so 0 and -0 are one JSON number), own keys only. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return (
    ka.length === kb.length &&
    ka.every(
      (k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual((a as any)[k], (b as any)[k]),
    )
  );
}

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

  it('keeps own __proto__ keys', () => {
    const value = JSON.parse('{"b":2,"__proto__":{"admin":true}}');
    expect(canonicalJson(value)).toBe('{"__proto__":{"admin":true},"b":2}');
    expect(canonicalJson(value)).not.toBe(canonicalJson({ b: 2 }));
  });

  it('follows JSON.stringify for undefined, functions, non-finite numbers and toJSON', () => {
    const value = {
      u: undefined,
      f: () => 1,
      list: [undefined, () => 1, NaN, Infinity, -0],
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

  it('throws a TypeError for a BigInt, as JSON.stringify does', () => {
    expect(() => canonicalJson({ n: BigInt(1) })).toThrow(TypeError);
  });
});
