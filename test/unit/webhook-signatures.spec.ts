/**
 * The three signature schemes of `@IdempotentWebhook()`, checked against the published test
 * vectors (the Standard Webhooks specification's, GitHub's) and against Stripe's own signer (the
 * `stripe` package), then against every way a delivery can be wrong: a tampered body, another
 * secret, a stale or future timestamp, a missing or malformed header. Comparisons are constant
 * time and never throw on a signature of another length. No database.
 */
import * as crypto from 'node:crypto';
import nodeCrypto from 'node:crypto';
import Stripe from 'stripe';
import { IdempotencyConfigurationError } from '../../lib';
import { resolveWebhookRoute } from '../../lib/webhooks/webhook-route';
import {
  signaturesEqual,
  signedIdOf,
  signingKeyOf,
  verifyWebhookSignature,
} from '../../lib/webhooks/webhook-signatures';
import type { ResolvedWebhookSignature } from '../../lib/webhooks/webhook-signatures';

/** A delivery with these header lines (names any case) and this body. */
function delivery(headers: Record<string, string | string[]>, body: string | Buffer) {
  const lines = Object.entries(headers).flatMap(([name, value]) =>
    (Array.isArray(value) ? value : [value]).map((v) => [name.toLowerCase(), v] as const),
  );
  return {
    header: (name: string) => lines.filter(([n]) => n === name.toLowerCase()).map(([, v]) => v),
    rawBody: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'),
  };
}

const hmacHex = (secret: string | Buffer, content: string) =>
  crypto.createHmac('sha256', secret).update(content).digest('hex');

describe('signaturesEqual', () => {
  const expected = Buffer.from(hmacHex('secret', 'body'), 'hex');

  it('is true for the same bytes', () => {
    expect(signaturesEqual(expected, Buffer.from(expected))).toBe(true);
  });

  it('is false for a wrong signature of the same length, without throwing', () => {
    const wrong = Buffer.from(expected);
    wrong[31] ^= 1;
    expect(signaturesEqual(expected, wrong)).toBe(false);
  });

  it('is false for a signature of another length, without throwing', () => {
    expect(() => signaturesEqual(expected, expected.subarray(0, 16))).not.toThrow();
    expect(signaturesEqual(expected, expected.subarray(0, 16))).toBe(false);
    expect(signaturesEqual(expected, Buffer.concat([expected, Buffer.from([0])]))).toBe(false);
    expect(signaturesEqual(expected, Buffer.alloc(0))).toBe(false);
  });

  it('compares with crypto.timingSafeEqual, whatever the lengths', () => {
    // The real comparison, watched on node:crypto's own module object (the one the library
    // calls through), so this works in Jest's CommonJS and ESM modes alike.
    const spy = jest.spyOn(nodeCrypto, 'timingSafeEqual');
    try {
      signaturesEqual(expected, Buffer.from(expected));
      signaturesEqual(expected, Buffer.alloc(3));
      expect(spy).toHaveBeenCalledTimes(2);
      for (const [a, b] of spy.mock.calls) expect((a as Buffer).length).toBe((b as Buffer).length);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('Stripe’s scheme', () => {
  const stripe = new Stripe('sk_test_unused');
  const signature: ResolvedWebhookSignature = {
    scheme: 'stripe',
    header: 'Stripe-Signature',
    toleranceSeconds: 300,
  };
  const secret = 'whsec_test_secret';
  const keys = [signingKeyOf('stripe', secret)!];
  const body = JSON.stringify({ id: 'evt_1', type: 'charge.refunded' }, null, 2);
  const t = 1_700_000_000;
  const now = t * 1000;
  const signed = (payload = body, timestamp = t, withSecret = secret) =>
    stripe.webhooks.generateTestHeaderString({ payload, secret: withSecret, timestamp });
  const verify = (header: string | string[] | undefined, payload = body, at = now, k = keys) =>
    verifyWebhookSignature(
      signature,
      delivery(header === undefined ? {} : { 'stripe-signature': header }, payload),
      k,
      at,
    );

  it('accepts what Stripe’s own library signs', () => {
    expect(verify(signed())).toEqual({ ok: true });
  });

  it('agrees with Stripe’s own verification on the same header', () => {
    const header = `t=${t},v1=${hmacHex(secret, `${t}.${body}`)}`;
    expect(() =>
      stripe.webhooks.constructEvent(body, header, secret, Number.MAX_SAFE_INTEGER),
    ).not.toThrow();
    expect(verify(header)).toEqual({ ok: true });
  });

  it('accepts a header with several v1 signatures when one matches (a rolled secret)', () => {
    const other = hmacHex('whsec_other', `${t}.${body}`);
    const good = hmacHex(secret, `${t}.${body}`);
    expect(verify(`t=${t},v1=${other},v1=${good},v0=abc`)).toEqual({ ok: true });
  });

  it('accepts any of several secrets (rotation)', () => {
    const rotated = [signingKeyOf('stripe', 'whsec_new')!, ...keys];
    expect(verify(signed(), body, now, rotated)).toEqual({ ok: true });
    expect(verify(signed(body, t, 'whsec_new'), body, now, rotated)).toEqual({ ok: true });
  });

  it('refuses a tampered body, another secret, a signature of another length', () => {
    const reason = expect.stringMatching(/no signature in it matches/);
    expect(verify(signed(), body.replace('evt_1', 'evt_2'))).toEqual({ ok: false, reason });
    expect(verify(signed(body, t, 'whsec_wrong'))).toEqual({ ok: false, reason });
    expect(verify(`t=${t},v1=abcd`)).toEqual({ ok: false, reason });
    expect(verify(`t=${t},v1=${'zz'.repeat(32)}`)).toEqual({ ok: false, reason });
  });

  it('refuses a timestamp outside the tolerance, either way, and accepts one at its edge', () => {
    expect(verify(signed(), body, now + 300_000)).toEqual({ ok: true });
    expect(verify(signed(), body, now - 300_000)).toEqual({ ok: true });
    for (const at of [now + 301_000, now - 301_000]) {
      expect(verify(signed(), body, at)).toEqual({
        ok: false,
        reason: expect.stringMatching(/more than 300 seconds from the server's clock/),
      });
    }
  });

  it('refuses a missing, repeated or malformed header', () => {
    expect(verify(undefined)).toEqual({
      ok: false,
      reason: 'the Stripe-Signature header is missing',
    });
    expect(verify([signed(), signed()])).toEqual({
      ok: false,
      reason: 'the Stripe-Signature header appears more than once',
    });
    const malformed = expect.stringMatching(/no timestamp \(t=\) or no v1 signature/);
    for (const header of ['', 'garbage', `t=${t}`, `v1=${hmacHex(secret, body)}`, 't=x,v1=00']) {
      expect(verify(header)).toEqual({ ok: false, reason: malformed });
    }
  });
});

describe('the Standard Webhooks scheme', () => {
  // The specification's published example.
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
  const timestamp = 1614265330;
  const body = '{"test": 2432232314}';
  const published = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';
  const signature: ResolvedWebhookSignature = {
    scheme: 'standard-webhooks',
    headers: { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' },
    toleranceSeconds: 300,
  };
  const keys = [signingKeyOf('standard-webhooks', secret)!];
  const verify = (
    headers: Record<string, string | string[]>,
    payload = body,
    at = timestamp * 1000,
    k = keys,
  ) => verifyWebhookSignature(signature, delivery(headers, payload), k, at);
  const headers = (sig = published, ts = String(timestamp), msg = id) => ({
    'webhook-id': msg,
    'webhook-timestamp': ts,
    'webhook-signature': sig,
  });

  it('accepts the specification’s published example, and gives its message id', () => {
    expect(verify(headers())).toEqual({ ok: true });
    expect(signedIdOf(signature, delivery(headers(), body))).toBe(id);
  });

  it('takes the secret with or without its whsec_ prefix', () => {
    expect(signingKeyOf('standard-webhooks', secret.slice('whsec_'.length))).toEqual(keys[0]);
  });

  it('accepts a space-separated list in which one v1 signature matches', () => {
    const list = `v1a,${Buffer.alloc(64).toString('base64')} v1,AAAA ${published}`;
    expect(verify(headers(list))).toEqual({ ok: true });
  });

  it('refuses a tampered body, another id, another secret', () => {
    const reason = expect.stringMatching(/no signature in it matches/);
    expect(verify(headers(), '{"test": 2432232315}')).toEqual({ ok: false, reason });
    expect(verify(headers(published, String(timestamp), 'msg_other'))).toEqual({
      ok: false,
      reason,
    });
    const other = [signingKeyOf('standard-webhooks', 'whsec_c2VjcmV0LW9mLWFub3RoZXI=')!];
    expect(verify(headers(), body, timestamp * 1000, other)).toEqual({ ok: false, reason });
  });

  it('accepts any of several secrets (rotation)', () => {
    const rotated = [signingKeyOf('standard-webhooks', 'whsec_c2VjcmV0LW9mLWFub3RoZXI=')!, ...keys];
    expect(verify(headers(), body, timestamp * 1000, rotated)).toEqual({ ok: true });
  });

  it('refuses a timestamp outside the tolerance, either way', () => {
    for (const at of [(timestamp + 301) * 1000, (timestamp - 301) * 1000]) {
      expect(verify(headers(), body, at)).toEqual({
        ok: false,
        reason: expect.stringMatching(/more than 300 seconds/),
      });
    }
    expect(verify(headers(), body, (timestamp + 300) * 1000)).toEqual({ ok: true });
  });

  it('refuses a missing header, a timestamp that is not a number, no v1 signature', () => {
    const noId: Record<string, string> = headers();
    delete noId['webhook-id'];
    expect(verify(noId)).toEqual({ ok: false, reason: 'the webhook-id header is missing' });
    const noSignature: Record<string, string> = headers();
    delete noSignature['webhook-signature'];
    expect(verify(noSignature)).toEqual({
      ok: false,
      reason: 'the webhook-signature header is missing',
    });
    expect(verify(headers(published, 'soon'))).toEqual({
      ok: false,
      reason: 'the webhook-timestamp header is not a unix timestamp',
    });
    expect(verify(headers('v2,abc'))).toEqual({
      ok: false,
      reason: 'the webhook-signature header has no v1 signature',
    });
  });

  it('refuses a secret that is not base64', () => {
    expect(signingKeyOf('standard-webhooks', 'whsec_not base64!')).toBeUndefined();
    expect(signingKeyOf('standard-webhooks', 'whsec_')).toBeUndefined();
  });
});

describe('a plain HMAC header (GitHub’s X-Hub-Signature-256)', () => {
  // GitHub's published example.
  const secret = "It's a Secret to Everybody";
  const body = 'Hello, World!';
  const published = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
  const signature: ResolvedWebhookSignature = {
    scheme: 'hmac',
    header: 'X-Hub-Signature-256',
    prefix: 'sha256=',
    encoding: 'hex',
  };
  const keys = [signingKeyOf('hmac', secret)!];
  const verify = (header: string | undefined, payload = body, k = keys, s = signature) =>
    verifyWebhookSignature(
      s,
      delivery(header === undefined ? {} : { 'X-Hub-Signature-256': header }, payload),
      k,
      0,
    );

  it('accepts GitHub’s published example', () => {
    expect(verify(published)).toEqual({ ok: true });
    expect(verify(published.toUpperCase().replace('SHA256=', 'sha256='))).toEqual({ ok: true });
  });

  it('refuses a tampered body, another secret, a truncated digest, no prefix, no header', () => {
    const reason = expect.stringMatching(/no signature in it matches/);
    expect(verify(published, 'Hello, World?')).toEqual({ ok: false, reason });
    expect(verify(published, body, [signingKeyOf('hmac', 'another')!])).toEqual({
      ok: false,
      reason,
    });
    expect(verify(published.slice(0, 30))).toEqual({ ok: false, reason });
    expect(verify(published.slice('sha256='.length))).toEqual({
      ok: false,
      reason: 'the X-Hub-Signature-256 header does not start with sha256=',
    });
    expect(verify(undefined)).toEqual({
      ok: false,
      reason: 'the X-Hub-Signature-256 header is missing',
    });
  });

  it('reads a base64 digest without a prefix (Shopify’s X-Shopify-Hmac-Sha256)', () => {
    const shopify: ResolvedWebhookSignature = {
      scheme: 'hmac',
      header: 'X-Hub-Signature-256',
      prefix: '',
      encoding: 'base64',
    };
    const digest = crypto.createHmac('sha256', secret).update(body).digest('base64');
    expect(verify(digest, body, keys, shopify)).toEqual({ ok: true });
    expect(verify(digest, 'tampered', keys, shopify).ok).toBe(false);
  });
});

describe('@IdempotentWebhook() options', () => {
  const base = { provider: 'stripe', signature: { scheme: 'stripe' }, secrets: 'whsec_1' } as const;
  const refused = (options: object, message: RegExp) => {
    let error: unknown;
    try {
      resolveWebhookRoute({ ...base, ...options } as any);
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect((error as Error).message).toMatch(message);
    return (error as Error).message;
  };

  it('fills in each scheme’s defaults', () => {
    expect(resolveWebhookRoute(base as any).signature).toEqual({
      scheme: 'stripe',
      header: 'Stripe-Signature',
      toleranceSeconds: 300,
    });
    const standard = resolveWebhookRoute({
      ...base,
      signature: { scheme: 'standard-webhooks', toleranceSeconds: '60' as any },
      secrets: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    });
    expect(standard.signature).toEqual({
      scheme: 'standard-webhooks',
      headers: { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' },
      toleranceSeconds: 60,
    });
    const github = resolveWebhookRoute({
      ...base,
      signature: { scheme: 'hmac' },
    });
    expect(github.signature).toEqual({
      scheme: 'hmac',
      header: 'X-Hub-Signature-256',
      prefix: 'sha256=',
      encoding: 'hex',
    });
  });

  it('keys an hmac delivery by what it signs: the SHA-256 of its body', () => {
    const github = resolveWebhookRoute({ ...base, signature: { scheme: 'hmac' } });
    const rawBody = Buffer.from('{"action":"opened"}');
    const digest = crypto.createHash('sha256').update(rawBody).digest('hex');
    expect(github.key({ payload: {}, rawBody, signedId: undefined })).toBe(`sha256:${digest}`);
    expect(github.unsignedKeyHeader).toBeUndefined();
  });

  it('refuses a bad provider, scheme, header, tolerance, or a misplaced unsignedKeyHeader', () => {
    refused({ provider: 'has space' }, /"provider" is invalid/);
    refused({ signature: { scheme: 'paypal' } }, /"signature" is invalid/);
    refused({ signature: { scheme: 'stripe', header: 'bad header' } }, /"signature.header"/);
    refused({ signature: { scheme: 'stripe', toleranceSeconds: 0 } }, /toleranceSeconds/);
    refused({ unsignedKeyHeader: 'X-Event-Id' }, /"unsignedKeyHeader".*stripe scheme signs/);
    refused(
      { signature: { scheme: 'hmac' }, unsignedKeyHeader: 'X-GitHub-Delivery', key: () => 'x' },
      /"unsignedKeyHeader".*not both/,
    );
    refused({ signature: { scheme: 'hmac' }, unsignedKeyHeader: 'bad header' }, /header name/);
  });

  it('refuses missing or unusable secrets without ever showing one', () => {
    refused({ secrets: [] }, /gave no webhook secret/);
    refused({ secrets: [''] }, /gave no webhook secret/);
    const message = refused(
      { signature: { scheme: 'standard-webhooks' }, secrets: ['whsec_bm90IHNob3du', 'whsec_!!'] },
      /secret \(number 2\) that cannot be used/,
    );
    expect(message).not.toContain('bm90IHNob3du');
    expect(message).not.toContain('!!');
  });
});
