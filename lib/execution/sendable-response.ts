import { validateHeaderName, validateHeaderValue } from 'node:http';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { responseBytes } from '../utils/response-bytes';
import type { OutgoingResponse } from '../utils/response-bytes';

/** A final answer as a writer gives it: an operation's `respond()`, an operator's resolution. */
export interface GivenResponse {
  /** The final status. */
  readonly status: unknown;
  /** Response headers, names in any case. */
  readonly headers?: Readonly<Record<string, unknown>>;
  /** The body: JSON, a string or bytes. */
  readonly body: unknown;
}

/**
 * An answer Node.js could not send. Stored, it would fail every replay of its key with a 500
 * until its TTL ends, so no writer stores one.
 */
export class UnsendableResponseError extends Error {
  /** @param why - what is wrong, as a clause: `status 1000, not …` */
  constructor(readonly why: string) {
    super(why);
    this.name = 'UnsendableResponseError';
  }
}

/**
 * The one check of every answer before it is stored (the handler's capture, `respond()`, the
 * completer, `resolveAbandoned()`, the CLI's `resolve`): a status from 100 to 599, header names
 * and values `res.setHeader()` accepts (no CR or LF, no non-ASCII value), and a body of bytes.
 * @throws UnsendableResponseError naming the first thing Node.js would refuse
 */
export function assertSendable(response: StoredResponse): void {
  const why = unsendable(response);
  if (why !== undefined) throw new UnsendableResponseError(why);
}

/** Whether Node.js could send `response`: `assertSendable()` passes. */
export function isSendable(response: StoredResponse): boolean {
  return unsendable(response) === undefined;
}

/** The first thing Node.js would refuse in `response`, as a clause; undefined when none. */
function unsendable(response: StoredResponse): string | undefined {
  const { status } = response;
  if (!Number.isInteger(status) || status < 100 || status > 599) {
    return `status ${String(status)}, not an HTTP status from 100 to 599`;
  }
  for (const name in response.headers) {
    const value = response.headers[name];
    try {
      validateHeaderName(name);
      for (const one of Array.isArray(value) ? value : [value]) validateHeaderValue(name, one);
    } catch {
      return `a header Node.js refuses to send ("${name}"; no CR or LF, encode non-ASCII values)`;
    }
  }
  return Buffer.isBuffer(response.body) ? undefined : 'a body that is not bytes';
}

/**
 * A given answer as it goes on the wire, checked by `assertSendable()`: header names in lower
 * case, the body as bytes (JSON text unless a string or bytes) with its content type.
 * @param textDefault - the content type of a string body without one
 * @throws UnsendableResponseError when Node.js could not send it
 */
export function sendableResponse(
  given: GivenResponse,
  textDefault = 'text/plain',
): OutgoingResponse {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(given.headers ?? {})) {
    headers[name.toLowerCase()] = headerText(name, value);
  }
  const type = headers['content-type'];
  const bytes = responseBytes(given.body, typeof type === 'string' ? type : undefined, textDefault);
  if (!bytes) {
    throw new UnsendableResponseError(
      'a body that cannot be sent as bytes: use JSON, a string or a Buffer',
    );
  }
  if (bytes.contentType) headers['content-type'] = bytes.contentType;
  const response = { status: given.status as number, headers, body: bytes.body };
  assertSendable(response);
  return response;
}

/** A header's value as text: a string, a number, or a list of them. */
function headerText(name: string, value: unknown): string | string[] {
  if (typeof value === 'string' || typeof value === 'number') return String(value);
  if (Array.isArray(value) && value.every((one) => typeof one === 'string')) return [...value];
  throw new UnsendableResponseError(`a header whose value is not text ("${name}")`);
}
