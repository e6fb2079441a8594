/**
 * fingerprintRequest (docs/design/contract.md#the-fingerprint): the fingerprint changes with scope, method, path and query, body
 * and every configured header, but not with key order or whitespace of a JSON body; non-JSON
 * bodies are fingerprinted on their raw bytes.
 */
import fc from 'fast-check';
import { fingerprintRequest } from '../../lib/utils/fingerprint';
import type { FingerprintInput } from '../../lib/utils/fingerprint';

const base: FingerprintInput = {
  scope: 'acct_1',
  method: 'POST',
  url: '/payments?expand=charge',
  body: { amount: 100, currency: 'eur', meta: { a: 1, b: [1, 2] } },
  contentType: 'application/json',
  headers: [['x-account-id', 'acct_1']],
};
const fp = (overrides: Partial<FingerprintInput> = {}) =>
  fingerprintRequest({ ...base, ...overrides });

describe('fingerprintRequest', () => {
  it('is 64 lower-case hex characters and stable for the same request', () => {
    expect(fp()).toMatch(/^[0-9a-f]{64}$/);
    expect(fp()).toBe(fp());
  });

  it.each<[string, Partial<FingerprintInput>]>([
    ['scope', { scope: 'acct_2' }],
    ['scope to none', { scope: '' }],
    ['method', { method: 'PUT' }],
    ['path', { url: '/refunds?expand=charge' }],
    ['query value', { url: '/payments?expand=customer' }],
    ['query removed', { url: '/payments' }],
    ['body value', { body: { ...(base.body as object), amount: 101 } }],
    ['body type', { body: { ...(base.body as object), amount: '100' } }],
    ['no body', { body: undefined }],
    ['configured header value', { headers: [['x-account-id', 'acct_2']] }],
    ['configured header absent', { headers: [['x-account-id', undefined]] }],
    ['configured header empty', { headers: [['x-account-id', '']] }],
  ])('changes with the %s', (_label, overrides) => {
    expect(fp(overrides)).not.toBe(fp());
  });

  it('tells an absent configured header from an empty one', () => {
    expect(fp({ headers: [['x-a', undefined]] })).not.toBe(fp({ headers: [['x-a', '']] }));
  });

  it('does not let one part run into the next', () => {
    expect(fp({ scope: 'a', url: 'b/x' })).not.toBe(fp({ scope: 'ab', url: '/x' }));
    expect(
      fp({
        headers: [
          ['x-a', 'b'],
          ['x-c', 'd'],
        ],
      }),
    ).not.toBe(
      fp({
        headers: [
          ['x-a', 'bx-c'],
          ['', 'd'],
        ],
      }),
    );
  });

  it('ignores key order and whitespace of a JSON body', () => {
    const a = '{"amount":100,"currency":"eur","meta":{"a":1,"b":[1,2]}}';
    const b = '{\n  "meta": { "b": [1, 2], "a": 1 },\n  "currency": "eur",\n  "amount": 100\n}';
    const one = fp({ body: JSON.parse(a), rawBody: Buffer.from(a) });
    const two = fp({ body: JSON.parse(b), rawBody: Buffer.from(b) });
    expect(one).toBe(two);
    expect(one).toBe(fp());
    expect(
      fp({ contentType: 'application/merge-patch+json; charset=utf-8', body: JSON.parse(b) }),
    ).toBe(fp({ contentType: 'application/merge-patch+json; charset=utf-8', body: JSON.parse(a) }));
  });

  it('ignores key order of any JSON body (property)', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 6 }), (body) => {
        const reversed = Object.fromEntries(Object.entries(body).reverse());
        expect(fp({ body: reversed })).toBe(fp({ body }));
      }),
      { numRuns: 100 },
    );
  });

  it('uses the raw bytes of a non-JSON body, not its parsed form', () => {
    const text = 'text/plain';
    const parsed = { a: '1', b: '2' };
    const urlencoded = 'application/x-www-form-urlencoded';
    expect(fp({ contentType: urlencoded, body: parsed, rawBody: Buffer.from('a=1&b=2') })).not.toBe(
      fp({ contentType: urlencoded, body: parsed, rawBody: Buffer.from('b=2&a=1') }),
    );
    expect(fp({ contentType: text, body: 'hello', rawBody: Buffer.from('hello') })).not.toBe(
      fp({ contentType: text, body: 'hello', rawBody: Buffer.from('hello ') }),
    );
  });

  // Regression: a JSON body that is a string (`"abc"`, which Fastify parses to 'abc') was
  // fingerprinted as the raw text abc, so it matched a text/plain body `abc` sent with the same
  // key, and a JSON `null` matched a request without a body: both got a replay of the other.
  it('tells a JSON string body from the same text sent as text/plain, and null from no body', () => {
    const json = 'application/json';
    expect(fp({ contentType: json, body: 'abc' })).not.toBe(
      fp({ contentType: 'text/plain', body: 'abc' }),
    );
    expect(fp({ contentType: json, body: 'abc', rawBody: Buffer.from('"abc"') })).not.toBe(
      fp({ contentType: 'text/plain', body: 'abc', rawBody: Buffer.from('abc') }),
    );
    expect(fp({ contentType: json, body: null })).not.toBe(
      fp({ contentType: undefined, body: undefined }),
    );
    expect(fp({ contentType: json, body: 'null' })).not.toBe(fp({ contentType: json, body: null }));
    expect(fp({ contentType: json, body: 'abc' })).toBe(
      fp({ contentType: 'application/json; charset=utf-8', body: 'abc' }),
    );
  });

  it('tells apart non-UTF-8 bodies that a text decoding would merge', () => {
    const octets = 'application/octet-stream';
    const a = Buffer.from([0x61, 0xff]);
    const b = Buffer.from([0x61, 0xfe]);
    expect(a.toString('utf8')).toBe(b.toString('utf8'));
    expect(fp({ contentType: octets, body: a })).not.toBe(fp({ contentType: octets, body: b }));
    expect(fp({ contentType: octets, body: {}, rawBody: a })).not.toBe(
      fp({ contentType: octets, body: {}, rawBody: b }),
    );
  });
});

describe('fingerprints already stored', () => {
  // Digests computed by the library before the fingerprint was hashed in one call (8e29586): a
  // record written then must still match its retry, or the retry would get 422.
  it.each<[string, FingerprintInput, string]>([
    [
      'JSON body, non-ASCII text, a configured header and an absent one',
      {
        scope: 'acct_1',
        method: 'post',
        url: '/payments?x=1',
        body: { b: 2, a: [1, 'é'] },
        contentType: 'application/json',
        headers: [
          ['x-tenant', 'ünï'],
          ['x-absent', undefined],
        ],
      },
      '316401ad340f4fafa2f5c451e8a11fa7eea4f2353ced9b993d57abdcfa78bd67',
    ],
    [
      'a Buffer body between text parts',
      {
        scope: '',
        method: 'PUT',
        url: '/files/1',
        body: Buffer.from([0, 1, 2, 255]),
        contentType: 'application/octet-stream',
        headers: [['x-a', 'b']],
      },
      '52d9c2e8bc5f960cd49a34c3bc94f4f742fe23e4c1207995f6d685c17e5dc1b6',
    ],
    [
      'raw bytes kept by rawBody',
      {
        scope: 's',
        method: 'POST',
        url: '/t',
        body: undefined,
        rawBody: Buffer.from('hello'),
        contentType: 'text/plain',
        headers: [],
      },
      '3a9ad5b816ad2009c6c9bdd343f6121c5676101e64e8e5b54c20ccf7812180b0',
    ],
    [
      'a text body',
      {
        scope: 'z',
        method: 'PATCH',
        url: '/x',
        body: 'plain text',
        contentType: 'text/plain',
        headers: [],
      },
      '96bbd1895f6e8d43f3e9a38be33e07da8b78c4287ee906b1f596a090d174a7a9',
    ],
  ])('%s: the same digest as before', (_name, input, digest) => {
    expect(fingerprintRequest(input)).toBe(digest);
  });
});
