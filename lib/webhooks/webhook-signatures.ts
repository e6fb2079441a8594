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

/** A hex digest's bytes; an empty buffer (which matches nothing) when it is not hex. */
function fromHex(text: string): Buffer {
  return /^(?:[0-9a-fA-F]{2})+$/.test(text) ? Buffer.from(text, 'hex') : Buffer.alloc(0);
}

/** Whether one of the given signatures is the HMAC of the content under one of the keys. */
function anyMatches(keys: readonly Buffer[], content: (string | Buffer)[], given: Buffer[]) {
  for (const key of keys) {
    const mac = crypto.createHmac('sha256', key);
    for (const part of content) mac.update(part);
    const expected = mac.digest();
    for (const signature of given) if (signaturesEqual(expected, signature)) return true;
  }
  return false;
}

/** Why a delivery is refused before any signature is compared (thrown, caught by the verify). */
class Refusal extends Error {}

/** The only value of a header; a `Refusal` when it is missing or sent more than once. */
function single(parts: WebhookDeliveryParts, name: string): string {
  const lines = parts.header(name);
  if (lines.length === 0) throw new Refusal(`the ${name} header is missing`);
  if (lines.length > 1) throw new Refusal(`the ${name} header appears more than once`);
  return lines[0].trim();
}

/**
 * The only value of a header, as it came; `undefined` when it is missing or sent more than once.
 * @param delivery - the delivery's headers and raw body
 * @param name - the header's name (any case)
 */
export function unsignedHeaderOf(delivery: WebhookDeliveryParts, name: string): string | undefined {
  const lines = delivery.header(name);
  return lines.length === 1 ? lines[0].trim() : undefined;
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
  return unsignedHeaderOf(delivery, signature.headers.id);
}

const NO_MATCH = 'no signature in it matches the body with a configured secret';

const UNIX_TIME = /^\d{1,15}$/;

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
  try {
    const { header, signed, given, timestamp } = signedPartsOf(signature, delivery);
    if (!anyMatches(keys, [signed, delivery.rawBody], given)) {
      return { ok: false, reason: `the ${header} header: ${NO_MATCH}` };
    }
    if (signature.scheme === 'hmac') return { ok: true };
    // The signed unix timestamp must be within the tolerance of now, either way.
    const tolerance = signature.toleranceSeconds;
    if (Math.abs(nowMs / 1000 - Number(timestamp)) <= tolerance) return { ok: true };
    const reason = `its timestamp is more than ${tolerance} seconds from the server's clock (a replayed or delayed delivery)`;
    return { ok: false, reason };
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, reason: error.message };
    throw error;
  }
}

/**
 * What a delivery's scheme signs: the header its signatures came in, what the HMAC covers
 * before the raw body, the signatures (decoded) and the signed timestamp.
 * @throws Refusal when a header is missing, repeated or malformed
 */
function signedPartsOf(
  signature: ResolvedWebhookSignature,
  delivery: WebhookDeliveryParts,
): { header: string; signed: string; given: Buffer[]; timestamp?: string } {
  switch (signature.scheme) {
    case 'stripe': {
      // `t=<timestamp>,v1=<hex>` over `<timestamp>.<body>`.
      const { header } = signature;
      let timestamp: string | undefined;
      const given: Buffer[] = [];
      for (const item of single(delivery, header).split(',')) {
        const [name, value] = item.split(/=(.*)/s, 2).map((part) => part.trim());
        if (value === undefined) continue;
        if (name === 't') timestamp = value;
        else if (name === 'v1') given.push(fromHex(value));
      }
      if (timestamp === undefined || !UNIX_TIME.test(timestamp) || given.length === 0) {
        throw new Refusal(`the ${header} header has no timestamp (t=) or no v1 signature`);
      }
      return { header, signed: `${timestamp}.`, given, timestamp };
    }
    case 'standard-webhooks': {
      const names = signature.headers;
      const id = single(delivery, names.id);
      const timestamp = single(delivery, names.timestamp);
      const list = single(delivery, names.signature);
      if (!UNIX_TIME.test(timestamp)) {
        throw new Refusal(`the ${names.timestamp} header is not a unix timestamp`);
      }
      const given = list
        .split(' ')
        .filter((entry) => entry.startsWith('v1,'))
        .map((entry) => Buffer.from(entry.slice('v1,'.length), 'base64'));
      if (given.length === 0)
        throw new Refusal(`the ${names.signature} header has no v1 signature`);
      return { header: names.signature, signed: `${id}.${timestamp}.`, given, timestamp };
    }
    case 'hmac': {
      const { header, prefix } = signature;
      const value = single(delivery, header);
      if (value.slice(0, prefix.length).toLowerCase() !== prefix.toLowerCase()) {
        throw new Refusal(`the ${header} header does not start with ${prefix}`);
      }
      const digest = value.slice(prefix.length);
      const given = signature.encoding === 'hex' ? fromHex(digest) : Buffer.from(digest, 'base64');
      return { header, signed: '', given: [given] };
    }
  }
}
