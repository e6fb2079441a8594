import crypto from 'node:crypto';

/** A signature scheme with every default filled in. */
export type ResolvedWebhookSignature =
  | { scheme: 'stripe'; header: string; toleranceSeconds: number }
  | {
      scheme: 'standard-webhooks';
      headers: { id: string; timestamp: string; signature: string };
      toleranceSeconds: number;
    }
  | { scheme: 'hmac'; header: string; prefix: string; encoding: 'hex' | 'base64' };

/** What the verification reads of a delivery. */
export interface WebhookDeliveryParts {
  /** Every value of one header (any case), one per header line. */
  header(name: string): string[];
  /** The bytes that were signed. */
  rawBody: Buffer;
}

/** The outcome of a verification: the reason never holds a secret or an expected signature. */
export type WebhookVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Compares two signatures in constant time. `timingSafeEqual` throws on buffers of different
 * lengths, so a given signature of another length is compared with nothing of its own: the
 * expected one is compared with itself, and the answer is false.
 * @param expected - the signature computed with a configured secret
 * @param given - the signature the delivery carries, decoded
 */
export function signaturesEqual(expected: Buffer, given: Buffer): boolean {
  if (given.length !== expected.length) {
    crypto.timingSafeEqual(expected, expected);
    return false;
  }
  return crypto.timingSafeEqual(expected, given);
}

/**
 * The HMAC key of a secret: a Standard Webhooks secret is `whsec_` (optional) followed by the
 * key in base64; Stripe's and plain HMAC secrets are used as written (UTF-8).
 * @param scheme - the route's scheme
 * @param secret - one configured secret
 * @returns the key, or `undefined` when a Standard Webhooks secret is not base64
 */
export function signingKeyOf(
  scheme: ResolvedWebhookSignature['scheme'],
  secret: string,
): Buffer | undefined {
  if (scheme !== 'standard-webhooks') return Buffer.from(secret, 'utf8');
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || encoded.length % 4 === 1) return undefined;
  const key = Buffer.from(encoded, 'base64');
  return key.length > 0 ? key : undefined;
}

function hmac(key: Buffer, ...parts: (string | Buffer)[]): Buffer {
  const mac = crypto.createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** A hex digest's bytes; an empty buffer (which matches nothing) when it is not hex. */
function fromHex(text: string): Buffer {
  return /^(?:[0-9a-fA-F]{2})+$/.test(text) ? Buffer.from(text, 'hex') : Buffer.alloc(0);
}

/** Whether one of the given signatures is the HMAC of the content under one of the keys. */
function anyMatches(keys: readonly Buffer[], content: (string | Buffer)[], given: Buffer[]) {
  for (const key of keys) {
    const expected = hmac(key, ...content);
    for (const signature of given) if (signaturesEqual(expected, signature)) return true;
  }
  return false;
}

/** The only value of a header, or why there is none. */
function single(parts: WebhookDeliveryParts, name: string): { value: string } | { reason: string } {
  const lines = parts.header(name);
  if (lines.length === 0) return { reason: `the ${name} header is missing` };
  if (lines.length > 1) return { reason: `the ${name} header appears more than once` };
  return { value: lines[0].trim() };
}

/**
 * The id a scheme signs besides the body, read as its verification reads it: the Standard
 * Webhooks message id; `undefined` for the schemes that sign the body alone.
 * @param signature - the scheme and its settings
 * @param delivery - the delivery's headers and raw body
 */
export function signedIdOf(
  signature: ResolvedWebhookSignature,
  delivery: WebhookDeliveryParts,
): string | undefined {
  if (signature.scheme !== 'standard-webhooks') return undefined;
  const id = single(delivery, signature.headers.id);
  return 'value' in id ? id.value : undefined;
}

/**
 * The only value of a header no signature covers, as it came; `undefined` when it is missing or
 * sent more than once.
 * @param delivery - the delivery's headers and raw body
 * @param name - the header's name (any case)
 */
export function unsignedHeaderOf(delivery: WebhookDeliveryParts, name: string): string | undefined {
  const value = single(delivery, name);
  return 'value' in value ? value.value : undefined;
}

const NO_MATCH = 'no signature in it matches the body with a configured secret';

/** Ok when a signed unix timestamp is within the tolerance of now, either way. */
function timely(timestamp: string, nowMs: number, toleranceSeconds: number): WebhookVerdict {
  if (Math.abs(nowMs / 1000 - Number(timestamp)) <= toleranceSeconds) return { ok: true };
  const reason = `its timestamp is more than ${toleranceSeconds} seconds from the server's clock (a replayed or delayed delivery)`;
  return { ok: false, reason };
}

/**
 * Verifies a delivery's signature over its raw body, with every secret given (any one that
 * signed it is enough). Signatures are compared in constant time; a timestamp is checked once
 * a signature matched, so a forged delivery learns nothing of the clock.
 *
 * @param signature - the scheme and its settings
 * @param delivery - the delivery's headers and raw body
 * @param keys - the HMAC keys of the configured secrets (`signingKeyOf`)
 * @param nowMs - the current time, in milliseconds since the epoch
 * @returns ok, or why not
 */
export function verifyWebhookSignature(
  signature: ResolvedWebhookSignature,
  delivery: WebhookDeliveryParts,
  keys: readonly Buffer[],
  nowMs: number,
): WebhookVerdict {
  const { rawBody } = delivery;
  switch (signature.scheme) {
    case 'stripe':
      return verifyStripe(signature, delivery, keys, nowMs);
    case 'standard-webhooks': {
      const names = signature.headers;
      const id = single(delivery, names.id);
      if ('reason' in id) return { ok: false, reason: id.reason };
      const timestamp = single(delivery, names.timestamp);
      if ('reason' in timestamp) return { ok: false, reason: timestamp.reason };
      const list = single(delivery, names.signature);
      if ('reason' in list) return { ok: false, reason: list.reason };
      if (!/^\d{1,15}$/.test(timestamp.value)) {
        return { ok: false, reason: `the ${names.timestamp} header is not a unix timestamp` };
      }
      const given: Buffer[] = [];
      for (const entry of list.value.split(' ')) {
        const comma = entry.indexOf(',');
        if (comma > 0 && entry.slice(0, comma) === 'v1') {
          given.push(Buffer.from(entry.slice(comma + 1), 'base64'));
        }
      }
      if (given.length === 0) {
        return { ok: false, reason: `the ${names.signature} header has no v1 signature` };
      }
      if (!anyMatches(keys, [`${id.value}.${timestamp.value}.`, rawBody], given)) {
        return { ok: false, reason: `the ${names.signature} header: ${NO_MATCH}` };
      }
      return timely(timestamp.value, nowMs, signature.toleranceSeconds);
    }
    case 'hmac': {
      const header = single(delivery, signature.header);
      if ('reason' in header) return { ok: false, reason: header.reason };
      const { prefix } = signature;
      if (header.value.slice(0, prefix.length).toLowerCase() !== prefix.toLowerCase()) {
        return {
          ok: false,
          reason: `the ${signature.header} header does not start with ${prefix}`,
        };
      }
      const digest = header.value.slice(prefix.length);
      const given = signature.encoding === 'hex' ? fromHex(digest) : Buffer.from(digest, 'base64');
      if (!anyMatches(keys, [rawBody], [given])) {
        return { ok: false, reason: `the ${signature.header} header: ${NO_MATCH}` };
      }
      return { ok: true };
    }
  }
}

/** Stripe's scheme: `t=<timestamp>,v1=<hex>` over `<timestamp>.<body>`. */
function verifyStripe(
  signature: Extract<ResolvedWebhookSignature, { scheme: 'stripe' }>,
  delivery: WebhookDeliveryParts,
  keys: readonly Buffer[],
  nowMs: number,
): WebhookVerdict {
  const { rawBody } = delivery;
  const header = single(delivery, signature.header);
  if ('reason' in header) return { ok: false, reason: header.reason };
  let timestamp: string | undefined;
  const given: Buffer[] = [];
  for (const item of header.value.split(',')) {
    const at = item.indexOf('=');
    if (at < 0) continue;
    const name = item.slice(0, at).trim();
    const value = item.slice(at + 1).trim();
    if (name === 't') timestamp = value;
    else if (name === 'v1') given.push(fromHex(value));
  }
  if (timestamp === undefined || !/^\d{1,15}$/.test(timestamp) || given.length === 0) {
    return {
      ok: false,
      reason: `the ${signature.header} header has no timestamp (t=) or no v1 signature`,
    };
  }
  if (!anyMatches(keys, [`${timestamp}.`, rawBody], given)) {
    return { ok: false, reason: `the ${signature.header} header: ${NO_MATCH}` };
  }
  return timely(timestamp, nowMs, signature.toleranceSeconds);
}
