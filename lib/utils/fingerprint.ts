import { createHash, hash as hashOnce } from 'node:crypto';
import type { Hash } from 'node:crypto';
import { canonicalJson } from './canonical-json';

/** What goes into a request fingerprint. */
export interface FingerprintInput {
  scope: string;
  method: string;
  /** Request path with its query string, as received. */
  url: string;
  /** The parsed body (canonical JSON) or its raw bytes (Buffer / string). */
  body: unknown;
  /** Raw body bytes when the application keeps them (`rawBody: true`). */
  rawBody?: Buffer;
  /** Value of the `content-type` header, used to pick JSON or raw bytes. */
  contentType?: string;
  /** Configured header names (lower case) and their values, in configuration order. */
  headers: [string, string | undefined][];
  /** The most body bytes (raw, or as canonical JSON) fingerprinted; more throws. */
  maxBodyBytes?: number;
}

/** A body over the `maxBodyBytes` of a fingerprint: too large to compare with a retry's. */
export class BodyTooLargeError extends Error {}

function bodyPart(input: FingerprintInput): string | Buffer {
  const { body, rawBody, contentType } = input;
  const declaredJson = contentType !== undefined && /[/+]json\b/i.test(contentType);
  const isJson = !contentType || declaredJson;
  if (rawBody && !isJson) return Buffer.concat([Buffer.from('raw:'), rawBody]);
  if (Buffer.isBuffer(body)) return Buffer.concat([Buffer.from('raw:'), body]);
  // Under a JSON content type a string or null body is a parsed JSON value (`"abc"`, `null`),
  // not text: it must not match the same characters sent as text/plain, nor a missing body.
  if (typeof body === 'string' && !declaredJson) return `raw:${body}`;
  if (body === undefined || (body === null && !declaredJson)) return 'none:';
  return `json:${canonicalJson(body)}`;
}

/**
 * SHA-256 over scope, method, path with query, canonical JSON body and configured headers.
 * Every part is length-prefixed, so no two different inputs can run into each other.
 *
 * @returns the fingerprint as 64 lower-case hex characters
 */
export function fingerprintRequest(input: FingerprintInput): string {
  // Text parts are gathered into one string and hashed in one call (UTF-8, as Buffer.from
  // would encode them); a raw body flushes what was gathered and goes in as its bytes. The
  // bytes hashed are the same either way. A request with no raw body (most) is hashed in one
  // shot, without a Hash object.
  let hash: Hash | undefined;
  let text = '';
  const part = (value: string | Buffer) => {
    if (typeof value === 'string') {
      text += `${Buffer.byteLength(value, 'utf8')}:${value}`;
      return;
    }
    hash ??= createHash('sha256');
    hash.update(`${text}${value.length}:`);
    hash.update(value);
    text = '';
  };
  part(input.scope);
  part(input.method.toUpperCase());
  part(input.url);
  const body = bodyPart(input);
  const size = typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.length;
  // The body part carries a short prefix (`json:`, `raw:`) the limit does not count.
  if (input.maxBodyBytes !== undefined && size > input.maxBodyBytes + 5) {
    throw new BodyTooLargeError(`body of ${size} bytes`);
  }
  part(body);
  for (const [name, value] of input.headers) {
    part(name);
    part(value === undefined ? '\u0000absent' : value);
  }
  if (!hash) return hashOnce('sha256', text, 'hex');
  if (text) hash.update(text, 'utf8');
  return hash.digest('hex');
}
