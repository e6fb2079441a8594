import type { StoredResponse } from '../interfaces/idempotency-record.interface';

/**
 * A response as it will go on the wire: final status, every header set so far (lower-case
 * names), the content type the adapter would pick, and the body bytes.
 */
export type OutgoingResponse = StoredResponse;

/**
 * Header names lower-cased, values as strings (arrays kept), unset values dropped.
 * @param headers - what `getHeaders()` returned (its own properties are the headers)
 */
export function lowerCaseHeaders(
  headers: Record<string, unknown>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  // for…in rather than Object.entries: no array per header on every response captured.
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    out[name.toLowerCase()] =
      typeof value === 'string' ? value : Array.isArray(value) ? value.map(String) : String(value);
  }
  return out;
}

/** Whether a payload is a stream (or anything else that is piped rather than sent as bytes). */
export function isStreamLike(payload: unknown): boolean {
  return typeof (payload as { pipe?: unknown } | null)?.pipe === 'function';
}

/**
 * Turns a payload into bytes and a content type, the way the adapter does by default: objects,
 * numbers and booleans become `JSON.stringify` text, strings get `charset=utf-8` on the given
 * text type, bytes stay bytes.
 *
 * @param payload - what a handler returned or a route sent
 * @param contentType - the content type already set on the response, if any
 * @param textDefault - the adapter's content type for strings (`text/html` on Express,
 *   `text/plain` on Fastify)
 * @returns undefined for payloads that are not bytes (streams, errors, functions)
 */
export function responseBytes(
  payload: unknown,
  contentType: string | undefined,
  textDefault: string,
): { body: Buffer; contentType: string | undefined } | undefined {
  if (payload === undefined || payload === null) return { body: Buffer.alloc(0), contentType };
  if (Buffer.isBuffer(payload) || payload instanceof Uint8Array) {
    return { body: Buffer.from(payload), contentType: contentType ?? 'application/octet-stream' };
  }
  if (isStreamLike(payload) || payload instanceof Error) return undefined;
  const kind = typeof payload;
  const json = kind === 'object' || kind === 'number' || kind === 'boolean';
  if (kind !== 'string' && !json) return undefined;
  const text = json ? JSON.stringify(payload) : (payload as string);
  const type = contentType ?? (json ? 'application/json' : textDefault);
  // The content type with `; charset=utf-8` added when it names no charset.
  const typeWithCharset = /;\s*charset=/i.test(type) ? type : `${type}; charset=utf-8`;
  return { body: Buffer.from(text, 'utf8'), contentType: typeWithCharset };
}
