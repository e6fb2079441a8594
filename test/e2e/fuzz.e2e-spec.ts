/**
 * Fuzzing the HTTP surface with fast-check, on Express and Fastify against real PostgreSQL:
 * hostile `Idempotency-Key` header lines (quotes, escapes, commas, control and non-ASCII bytes,
 * huge lengths, repeated lines), random JSON bodies (duplicate keys, prototype keys, unusual
 * number spellings) on an unvalidated route and on one behind a ValidationPipe, very deep
 * nesting, huge strings and non-JSON or garbage content types.
 *
 * Requests are written byte for byte on a socket (test/fixtures/raw-http.ts), so the bytes
 * reach Node's parser untouched. Whatever arrives, the library must never answer 5xx for client
 * garbage, never run the handler for or store a request rejected before its handler, replay
 * byte-identical responses, and never take two different bodies for the same request.
 *
 * Runs are bounded (fast-check prints the seed and the shrunk counterexample on failure).
 */
import fc from 'fast-check';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { rawRequest } from '../fixtures/raw-http';
import type { RawHeader, RawRequestSpec, RawResponse } from '../fixtures/raw-http';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import { jsonEqual } from '../shared/json-equality';
import type { TestApp } from '../fixtures/test-app';

const PROBLEM = /^application\/problem\+json/;
const JSON_TYPE: RawHeader = ['Content-Type', 'application/json'];
/** Body size limits of the adapters' default JSON parsers (body-parser 100kb, Fastify 1 MiB). */
const BODY_LIMIT = { express: 100 * 1024, fastify: 1024 * 1024 } as const;

// ---------------------------------------------------------------------------------------------
// The key header, as docs/design/contract.md#the-key states it (an oracle written independently of lib/utils).

type ExpectedKey = { kind: 'missing' } | { kind: 'invalid' } | { kind: 'valid'; key: string };

function expectedKey(lines: string[]): ExpectedKey {
  if (lines.length === 0) return { kind: 'missing' };
  if (lines.length > 1) return { kind: 'invalid' };
  const value = lines[0].replace(/^[ \t]+|[ \t]+$/g, '');
  if (!/^[\x20-\x7e]*$/.test(value)) return { kind: 'invalid' };
  let key: string;
  if (value.startsWith('"')) {
    const quoted = /^"((?:[^"\\]|\\["\\])*)"$/.exec(value);
    if (!quoted) return { kind: 'invalid' };
    key = quoted[1].replace(/\\(["\\])/g, '$1').trim();
  } else {
    if (value.includes(',')) return { kind: 'invalid' };
    key = value;
  }
  return key.length >= 1 && key.length <= 255 ? { kind: 'valid', key } : { kind: 'invalid' };
}

/** Node's HTTP parser itself answers 400 (or 431) for these, before any application code. */
const isControl = (c: number) => (c < 0x20 && c !== 0x09) || c === 0x7f;
const nodeMayReject = (values: string[]) =>
  values.some((v) => [...v].some((ch) => isControl(ch.charCodeAt(0)))) ||
  values.reduce((n, v) => n + v.length, 0) > 15_000;

const quote = (key: string) => `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;

/** Any byte but CR and LF (which would end the header line), as a latin1 character. */
const anyByte = fc
  .integer({ min: 0, max: 255 })
  .filter((c) => c !== 0x0a && c !== 0x0d)
  .map((c) => String.fromCharCode(c));
const printable = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
const tricky = fc.constantFrom('"', '\\', ',', ' ', '\t', 'a', 'Z', '9', '-', '\u00e9', '\u007f');
const utf8AsLatin1 = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

const keyValue = fc.oneof(
  fc.string({ unit: printable, minLength: 1, maxLength: 255 }),
  fc.string({ unit: anyByte, maxLength: 40 }),
  fc.string({ unit: tricky, maxLength: 30 }),
  fc.string({ unit: tricky, maxLength: 30 }).map((s) => `"${s}"`),
  fc.string({ unit: printable, maxLength: 30 }).map((s) => `"${s}"${s.length % 2 ? '' : ','}`),
  fc
    .string({ unit: fc.constantFrom('\u00e9', '\u20ac', '\u{1F600}', 'a'), minLength: 1 })
    .map(utf8AsLatin1),
  fc.integer({ min: 250, max: 20_000 }).map((n) => 'k'.repeat(n)),
  fc.integer({ min: 250, max: 300 }).map((n) => quote('q'.repeat(n))),
);
const keyHeaderName = fc.constantFrom('Idempotency-Key', 'idempotency-key', 'IDEMPOTENCY-KEY');
const keyLines = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(keyHeaderName, keyValue).map((line) => [line]) },
  { weight: 1, arbitrary: fc.array(fc.tuple(keyHeaderName, keyValue), { maxLength: 3 }) },
);

// ---------------------------------------------------------------------------------------------
// Raw JSON texts: a small model rendered to text, so duplicate keys, escaped keys and unusual
// number spellings survive into the bytes on the wire.

type Model =
  | { t: 'lit'; text: string }
  | { t: 'arr'; items: Model[] }
  | { t: 'obj'; entries: [string, Model][] };

const numberText = fc.constantFrom(
  '0',
  '-0',
  '0.0',
  '1',
  '1.0',
  '1e0',
  '10e-1',
  '-1',
  '0.1',
  '0.10000000000000001',
  '1e308',
  '1.7976931348623157e308',
  '1e400',
  '-1e400',
  '2e400',
  '5e-324',
  '1e-400',
  '9007199254740992',
  '9007199254740993',
  '123456789012345678901234567890',
);
const stringText = fc.constantFrom(
  '""',
  '"a"',
  '"\\u0061"',
  '"A"',
  '"\\"\\\\"',
  '"\u00e9"',
  '"\\u00e9"',
  '"\u{1F600}"',
  '"\\ud83d\\ude00"',
  '"\\ud800"',
  '"\\u0000"',
  '"__proto__"',
  '"1"',
  '"null"',
  '"a,b"',
);
/** Object keys as JSON string contents: `\u0061` is the key `a` spelled differently. */
const keyText = fc.constantFrom(
  'a',
  '\\u0061',
  'b',
  'A',
  '',
  '__proto__',
  'constructor',
  'prototype',
  'toJSON',
);
const leaf: fc.Arbitrary<Model> = fc
  .oneof(numberText, stringText, fc.constantFrom('true', 'false', 'null'))
  .map((text) => ({ t: 'lit', text }));
const model: fc.Arbitrary<Model> = fc.letrec<{ m: Model }>((tie) => ({
  m: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('m'), { maxLength: 4 }).map((items): Model => ({ t: 'arr', items })),
    fc
      .array(fc.tuple(keyText, tie('m')), { maxLength: 4 })
      .map((entries): Model => ({ t: 'obj', entries })),
  ),
})).m;
/**
 * Two JSON texts from one group of look-alikes, some the same value (`1` and `1.0`, `1e400` and
 * `2e400`), some not (`1e400` and `null`, `"1"` and `1`): the pairs a canonicalisation that
 * goes through JSON.stringify, or trims, or normalises strings, would get wrong.
 */
const lookAlikes = fc
  .constantFrom(
    ['null', '1e400', '-1e400', '2e400', '0', '-0', '1e-400'],
    ['null', '1e400', '-1e400', '0'],
    ['1', '1.0', '1e0', '10e-1', '"1"', 'true', '[1]'],
    ['9007199254740992', '9007199254740993', '9007199254740994', '1e16', '10000000000000001'],
    ['0.1', '0.10000000000000001', '0.1000000000000001', '1e-1'],
    ['"a"', '"\\u0061"', '"A"', '"a "', '" a"', '"a\\u0000"'],
    ['"\\ud83d\\ude00"', '"\u{1F600}"', '"\\ud800"', '"\\ude00"', '"\\ud800\\ude00"'],
    ['{}', '[]', '""', 'null', '{"__proto__":{}}', '{"":null}', '{"a":null}', '[null]'],
  )
  .chain((group) => fc.tuple(fc.constantFrom(...group), fc.constantFrom(...group)));

/** Bodies are mostly objects and arrays; Express refuses any other top level (strict mode). */
const bodyModel = fc.oneof(
  { weight: 5, arbitrary: model.filter((m) => m.t !== 'lit') },
  { weight: 1, arbitrary: model },
);

function render(m: Model, ws: string): string {
  if (m.t === 'lit') return m.text;
  if (m.t === 'arr') return `[${ws}${m.items.map((i) => render(i, ws)).join(`,${ws}`)}${ws}]`;
  const entries = m.entries.map(([k, v]) => `"${k}"${ws}:${ws}${render(v, ws)}`);
  return `{${ws}${entries.join(`,${ws}`)}${ws}}`;
}

/** The same model with every object's entries reversed (changes meaning only for duplicates). */
function reverseEntries(m: Model): Model {
  if (m.t === 'lit') return m;
  if (m.t === 'arr') return { t: 'arr', items: m.items.map(reverseEntries) };
  return {
    t: 'obj',
    entries: m.entries.map(([k, v]): [string, Model] => [k, reverseEntries(v)]).reverse(),
  };
}

/** The model with its n-th leaf (modulo the leaf count) replaced. */
function replaceLeaf(m: Model, n: number, by: Model): Model {
  const count = (x: Model): number =>
    x.t === 'lit'
      ? 1
      : (x.t === 'arr' ? x.items : x.entries.map(([, v]) => v)).reduce((s, c) => s + count(c), 0);
  let target = n % Math.max(1, count(m));
  const walk = (x: Model): Model => {
    if (x.t === 'lit') return target-- === 0 ? by : x;
    if (x.t === 'arr') return { t: 'arr', items: x.items.map(walk) };
    return { t: 'obj', entries: x.entries.map(([k, v]): [string, Model] => [k, walk(v)]) };
  };
  return walk(m);
}

/** Fastify (secure-json-parse) refuses `__proto__` keys and `constructor.prototype` with 400. */
function fastifyRefuses(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (!Array.isArray(v)) {
      if (Object.hasOwn(v, '__proto__')) return true;
      const ctor = (v as any).constructor;
      if (Object.hasOwn(v, 'constructor') && ctor !== null && typeof ctor === 'object') {
        if (Object.hasOwn(ctor, 'prototype')) return true;
      }
    }
    stack.push(...Object.values(v));
  }
  return false;
}

// ---------------------------------------------------------------------------------------------

describe.each(ADAPTERS)('fuzzing on %s', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let port: number;
  let seq = 0;
  const newKey = () => `fuzz-${adapter}-${++seq}-${Date.now()}`;
  const send = (spec: RawRequestSpec) => rawRequest(port, spec);
  const postAny = (key: string, body: string | Buffer, headers: RawHeader[] = [JSON_TYPE]) =>
    send({ path: '/orders/any', headers: [['Idempotency-Key', key], ...headers], body });
  const rows = (key: string) =>
    db.query<{ status: string; response_status: number; response_body: Buffer }>(
      'SELECT status, response_status, response_body FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
  const runs = () => t.probe.ran('any');
  const describeResponse = (r: RawResponse) =>
    `${r.status} ${r.headers['content-type'] ?? ''} ${r.body.toString('utf8').slice(0, 300)}`;

  /** A response to a client error: below 500, with a message that shows what came back. */
  function expectNoServerError(r: RawResponse): void {
    if (r.status >= 500) throw new Error(`5xx for client garbage: ${describeResponse(r)}`);
  }

  /** First execution of a fresh key: ran once, stored before sent, byte for byte. */
  async function expectExecutedAndStored(key: string, r: RawResponse, runsBefore: number) {
    expect(r.status).toBe(201);
    expect(r.headers['idempotent-replayed']).toBeUndefined();
    expect(runs()).toBe(runsBefore + 1);
    const [row] = await rows(key);
    expect(row.status).toBe('completed');
    expect(row.response_status).toBe(201);
    expect(row.response_body.equals(r.body)).toBe(true);
  }

  function expectReplayOf(first: RawResponse, again: RawResponse): void {
    expect(again.status).toBe(first.status);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(again.body.equals(first.body)).toBe(true);
  }

  /** Rejected before the handler: nothing ran, nothing is left for this key. */
  async function expectRejectedUntouched(key: string, r: RawResponse, runsBefore: number) {
    expect(r.status).toBeGreaterThanOrEqual(400);
    expectNoServerError(r);
    expect(runs()).toBe(runsBefore);
    expect(await rows(key)).toEqual([]);
  }
  /**
   * Sends a new request: above the adapter's body limit it must be refused with 413 and leave
   * nothing behind; otherwise it runs once and its retry replays. Resolves to whether it ran.
   */
  async function runsOnceOrIsTooLarge(key: string, text: string, runsBefore: number) {
    const r = await postAny(key, text);
    expectNoServerError(r);
    if (Buffer.byteLength(text) > BODY_LIMIT[adapter]) {
      expect(r.status).toBe(413);
      await expectRejectedUntouched(key, r, runsBefore);
      return false;
    }
    await expectExecutedAndStored(key, r, runsBefore);
    expectReplayOf(r, await postAny(key, text));
    return true;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db);
    await t.app.listen(0, '127.0.0.1');
    port = t.app.getHttpServer().address().port;
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('answers every hostile key header with 201 for a valid key or 400 problem+json, never 5xx', async () => {
    let scopeSeq = 0;
    await fc.assert(
      fc.asyncProperty(keyLines, async (lines) => {
        // A scope of its own per run (the fixture's auth guard reads x-user), so equal keys
        // from two runs never meet.
        const scope = `keys-${adapter}-${++scopeSeq}`;
        const values = lines.map(([, value]) => value);
        const scopeRows = () =>
          db.query('SELECT idempotency_key, status FROM idempotency_records WHERE scope = $1', [
            scope,
          ]);
        const request: RawRequestSpec = {
          path: '/orders/any',
          headers: [['x-user', scope], JSON_TYPE, ...lines],
          body: '{"amount":1}',
        };
        const before = runs();
        const r = await send(request);
        expectNoServerError(r);

        if (r.status >= 400 && !PROBLEM.test(r.headers['content-type'] ?? '')) {
          // Refused by Node's HTTP parser (control bytes, oversized headers): fine, and early.
          expect(nodeMayReject(values)).toBe(true);
          expect([400, 431]).toContain(r.status);
          expect(runs()).toBe(before);
          expect(await scopeRows()).toEqual([]);
          return;
        }
        const expected = expectedKey(values);
        if (expected.kind !== 'valid') {
          expect(r.status).toBe(400);
          expect(r.headers['cache-control']).toBe('no-store');
          const problem = JSON.parse(r.body.toString('utf8'));
          expect(problem).toMatchObject({
            status: 400,
            code:
              expected.kind === 'missing' ? 'idempotency_key_missing' : 'idempotency_key_invalid',
          });
          for (const member of ['type', 'title', 'detail']) {
            expect(typeof problem[member]).toBe('string');
          }
          for (const value of values) {
            if (value.trim().length >= 16) expect(problem.detail).not.toContain(value.trim());
          }
          expect(runs()).toBe(before);
          expect(await scopeRows()).toEqual([]);
          return;
        }
        expect(r.status).toBe(201);
        expect(r.headers['idempotent-replayed']).toBeUndefined();
        expect(runs()).toBe(before + 1);
        expect(await scopeRows()).toEqual([{ idempotency_key: expected.key, status: 'completed' }]);
        // The same header again, and the key in its other form (bare ⇄ quoted), replay it.
        expectReplayOf(r, await send(request));
        const wasQuoted = values[0].trim().startsWith('"');
        const bareForm = !expected.key.includes(',') && !expected.key.startsWith('"');
        if (!wasQuoted || bareForm) {
          const other = wasQuoted ? expected.key : quote(expected.key);
          const headers: RawHeader[] = [['x-user', scope], JSON_TYPE, [lines[0][0], other]];
          expectReplayOf(r, await send({ ...request, headers }));
        }
        expect(runs()).toBe(before + 1);
      }),
      { numRuns: 100 },
    );
  });

  it('runs random JSON bodies once, replays them byte for byte and answers 422 to any other body', async () => {
    const mutation = fc.constantFrom(
      'whitespace',
      'reverse',
      'leaf',
      'other',
      'look-alike',
      'look-alike',
      'look-alike',
    );
    await fc.assert(
      fc.asyncProperty(
        bodyModel,
        mutation,
        fc.nat(),
        leaf,
        model,
        lookAlikes,
        async (m, how, at, newLeaf, otherModel, [x, y]) => {
          const key = newKey();
          const lit = (text: string): Model => ({ t: 'lit', text });
          const firstModel = how === 'look-alike' ? replaceLeaf(m, at, lit(x)) : m;
          const secondModel =
            how === 'reverse'
              ? reverseEntries(m)
              : how === 'leaf'
                ? replaceLeaf(m, at, newLeaf)
                : how === 'other'
                  ? otherModel
                  : how === 'look-alike'
                    ? replaceLeaf(m, at, lit(y))
                    : m;
          const first = render(firstModel, '');
          const second = render(secondModel, how === 'whitespace' ? ' \n\t' : ' ');
          const refused = (text: string) => {
            const value = JSON.parse(text);
            return adapter === 'express'
              ? value === null || typeof value !== 'object'
              : fastifyRefuses(value);
          };

          const before = runs();
          const r1 = await postAny(key, first);
          expectNoServerError(r1);
          if (refused(first)) return expectRejectedUntouched(key, r1, before);
          await expectExecutedAndStored(key, r1, before);
          expectReplayOf(r1, await postAny(key, first));

          const r2 = await postAny(key, second);
          expectNoServerError(r2);
          if (refused(second)) {
            expect(r2.status).toBe(400);
          } else if (jsonEqual(JSON.parse(first), JSON.parse(second))) {
            expectReplayOf(r1, r2);
          } else {
            expect(r2.status).toBe(422);
            expect(r2.headers['content-type']).toMatch(PROBLEM);
            expect(JSON.parse(r2.body.toString('utf8')).code).toBe('idempotency_key_reused');
          }
          expect(runs()).toBe(before + 1);
          expect((await rows(key))[0].response_body.equals(r1.body)).toBe(true);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('leaves no record when the ValidationPipe refuses a random body: the key stays usable', async () => {
    await fc.assert(
      fc.asyncProperty(
        bodyModel,
        fc.option(fc.integer({ min: -2, max: 3 }), { nil: undefined }),
        async (m, amount) => {
          const key = newKey();
          const body =
            m.t === 'obj' && amount !== undefined
              ? render(
                  {
                    t: 'obj',
                    entries: [['amount', { t: 'lit', text: `${amount}` }], ...m.entries],
                  },
                  '',
                )
              : render(m, '');
          const post = (text: string) =>
            send({ path: '/orders', headers: [['Idempotency-Key', key], JSON_TYPE], body: text });
          const before = t.probe.ran('create');
          const r = await post(body);
          expectNoServerError(r);
          if (r.status === 201) {
            expect(t.probe.ran('create')).toBe(before + 1);
            expect((await rows(key))[0].status).toBe('completed');
            return;
          }
          expect(r.status).toBe(400);
          expect(r.headers['content-type']).not.toMatch(PROBLEM); // the pipe's, not ours
          expect(t.probe.ran('create')).toBe(before);
          expect(await rows(key)).toEqual([]);
          // Rejected before the handler, so the same key runs a corrected body.
          const fixed = await post('{"amount":5}');
          expect(fixed.status).toBe(201);
          expect(fixed.headers['idempotent-replayed']).toBeUndefined();
          expect(t.probe.ran('create')).toBe(before + 1);
        },
      ),
      { numRuns: 40 },
    );
  });

  it('tells apart bodies that used to share a fingerprint (regressions found by this suite)', async () => {
    const before = runs();
    // `1e400` parses to Infinity, which was fingerprinted like null.
    const key = newKey();
    const first = await postAny(key, '{"a":1e400}');
    await expectExecutedAndStored(key, first, before);
    expectReplayOf(first, await postAny(key, '{"a":2e400}')); // the same parsed value
    for (const other of ['{"a":null}', '{"a":-1e400}']) {
      expect((await postAny(key, other)).status).toBe(422);
    }
    // A JSON string body was fingerprinted as its bare text, and a JSON null as no body at all.
    // Fastify parses both; Express's JSON parser refuses any top level but an object or array,
    // and Express has no text parser here: a body nobody parsed is refused, never compared.
    const unparsed = adapter === 'express' ? 415 : 201;
    const textKey = newKey();
    const text = await postAny(textKey, 'abc', [['Content-Type', 'text/plain']]);
    expect(text.status).toBe(unparsed);
    if (unparsed === 415)
      expect(JSON.parse(text.body.toString()).code).toBe('idempotency_body_unreadable');
    expect((await postAny(textKey, '"abc"')).status).toBe(adapter === 'fastify' ? 422 : 400);
    const noBodyKey = newKey();
    const noBody = await send({ path: '/orders/any', headers: [['Idempotency-Key', noBodyKey]] });
    expect(noBody.status).toBe(201);
    expect((await postAny(noBodyKey, 'null')).status).toBe(adapter === 'fastify' ? 422 : 400);
    // A chunked body nobody parsed (no Content-Length) was fingerprinted like no body at all.
    const chunkedKey = newKey();
    const chunked = await send({
      path: '/orders/any',
      headers: [
        ['Idempotency-Key', chunkedKey],
        ['Content-Type', 'text/plain'],
      ],
      body: 'hello',
      chunked: true,
    });
    expect(chunked.status).toBe(unparsed);
    const empty = await send({ path: '/orders/any', headers: [['Idempotency-Key', chunkedKey]] });
    // Refused unread, the chunked body claimed nothing: the key is still free on Express.
    expect(empty.status).toBe(unparsed === 415 ? 201 : 422);
    expect(runs()).toBe(before + (unparsed === 415 ? 3 : 4));
  });

  it('survives very deep nesting: runs once, replays, and tells a change at the bottom', async () => {
    const shapes = {
      array: (depth: number, inner: string) => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`,
      object: (depth: number, inner: string) =>
        `${'{"a":'.repeat(depth)}${inner}${'}'.repeat(depth)}`,
      mixed: (depth: number, inner: string) =>
        `${'[{"constructor":0,"prototype":1,"a":'.repeat(depth / 2)}${inner}${'}]'.repeat(depth / 2)}`,
    };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<keyof typeof shapes>('array', 'object', 'mixed'),
        fc.integer({ min: 1_000, max: 100_000 }),
        async (shape, n) => {
          // Up to 100k levels of arrays; objects carry more bytes per level, so fewer levels
          // keep each request in the hundreds of KB (past Express's limit: 413).
          const levels = shape === 'array' ? n : Math.floor(n / (shape === 'object' ? 3 : 5));
          const depth = levels - (levels % 2);
          const key = newKey();
          const text = shapes[shape](depth, '0');
          const before = runs();
          if (!(await runsOnceOrIsTooLarge(key, text, before))) return;
          for (const changed of [shapes[shape](depth, '1'), shapes[shape](depth - 2, '0')]) {
            const other = await postAny(key, changed);
            expect(other.status).toBe(422);
          }
          expect(runs()).toBe(before + 1);
        },
      ),
      { numRuns: 10 },
    );
  });

  it('runs huge strings once, replays them, and tells a one-character change', async () => {
    const chars = fc.constantFrom('a', 'Z', ' ', '"', '\\', '\n', '\u00e9', '\u20ac', '\u{1F600}');
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: chars, minLength: 1, maxLength: 8 }),
        fc.integer({ min: 5_000, max: 400_000 }),
        async (piece, length) => {
          const key = newKey();
          const huge = piece.repeat(Math.ceil(length / piece.length)).slice(0, length);
          const text = JSON.stringify({ s: huge });
          const before = runs();
          if (!(await runsOnceOrIsTooLarge(key, text, before))) return;
          const middle = Math.floor(huge.length / 2);
          const changed = `${huge.slice(0, middle)}${huge[middle] === 'x' ? 'y' : 'x'}${huge.slice(middle + 1)}`;
          const other = await postAny(key, JSON.stringify({ s: changed }));
          expect(other.status).toBe(422);
          expect(runs()).toBe(before + 1);
        },
      ),
      { numRuns: 12 },
    );
  });

  it('never answers 5xx to non-JSON or garbage content types, and stores only what ran', async () => {
    const contentType = fc.oneof(
      fc.constantFrom(
        'text/plain',
        'text/plain; charset=utf-8',
        'text/plain; charset=latin1',
        'application/x-www-form-urlencoded',
        'application/octet-stream',
        'multipart/form-data; boundary=zzz',
        'application/xml',
        'application/vnd.api+json',
        'application/json; charset=utf-16',
        'application/json; charset=evil',
        'text/json',
        '*/*',
        ';',
        '',
      ),
      fc.string({ unit: printable, maxLength: 40 }),
      fc.string({ unit: anyByte, maxLength: 30 }),
    );
    const body = fc.oneof(
      fc.uint8Array({ maxLength: 2_000 }).map((bytes) => Buffer.from(bytes)),
      fc
        .array(fc.tuple(fc.string({ unit: tricky }), fc.string({ unit: anyByte })), {
          maxLength: 5,
        })
        .map((pairs) => Buffer.from(pairs.map(([k, v]) => `${k}=${v}`).join('&'), 'latin1')),
      fc.string({ unit: anyByte, maxLength: 500 }).map((s) => Buffer.from(s, 'latin1')),
    );
    const encoding = fc.option(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-nope'), {
      nil: undefined,
    });
    await fc.assert(
      fc.asyncProperty(
        contentType,
        body,
        fc.boolean(),
        encoding,
        fc.uint8Array({ minLength: 1, maxLength: 3 }),
        async (type, bytes, chunked, contentEncoding, extra) => {
          const key = newKey();
          const headers: RawHeader[] = [
            ['Idempotency-Key', key],
            ['Content-Type', type],
          ];
          if (contentEncoding) headers.push(['Content-Encoding', contentEncoding]);
          const request: RawRequestSpec = { path: '/orders/any', headers, body: bytes, chunked };
          const before = runs();
          const r = await send(request);
          expectNoServerError(r);
          if (r.status >= 400) return expectRejectedUntouched(key, r, before);
          await expectExecutedAndStored(key, r, before);
          expectReplayOf(r, await send(request));
          // Another body with the completed key never runs the handler again: 422, or a replay
          // where the adapter did not parse the body (see fingerprintableBody), or a 4xx from
          // the body parser.
          const other = await send({
            ...request,
            body: Buffer.concat([bytes, Buffer.from(extra)]),
          });
          expectNoServerError(other);
          if (other.status === 201) expectReplayOf(r, other);
          else expect(other.status).toBeGreaterThanOrEqual(400);
          expect(runs()).toBe(before + 1);
          expect((await rows(key))[0].response_body.equals(r.body)).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('is still serving normally after the fuzzing: a new key runs once and replays', async () => {
    const key = newKey();
    const runs = t.probe.ran('create');
    const created = await send({
      path: '/orders',
      headers: [['Idempotency-Key', key], JSON_TYPE],
      body: '{"amount":42,"note":"after the fuzz"}',
    });
    expect(created.status).toBe(201);
    const replay = await send({
      path: '/orders',
      headers: [['idempotency-key', quote(key)], JSON_TYPE],
      body: '{ "note": "after the fuzz", "amount": 42 }',
    });
    expectReplayOf(created, replay);
    expect(replay.headers.location).toBe(created.headers.location);
    const reused = await send({
      path: '/orders',
      headers: [['Idempotency-Key', key], JSON_TYPE],
      body: '{"amount":43,"note":"after the fuzz"}',
    });
    expect(reused.status).toBe(422);
    expect(t.probe.ran('create')).toBe(runs + 1);
  });
});
