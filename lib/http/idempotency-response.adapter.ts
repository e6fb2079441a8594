import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { lowerCaseHeaders } from '../utils/response-bytes';
import type { ResponseSink, ResponseSnapshot } from './response-sink.interface';

/**
 * How the library reads and writes one HTTP adapter's responses. One implementation per
 * adapter (Express, Fastify), chosen from `HttpAdapterHost.httpAdapter.getType()`.
 */
export abstract class IdempotencyResponseAdapter {
  /** The content type the adapter gives a string body when none is set. */
  abstract readonly textContentType: string;

  /**
   * Readies one request and its response for what the library reads and hooks on them; the
   * guard calls it first, on every request to an idempotent route. Nothing by default: Fastify's
   * requests and replies, and Node's own, share their V8 maps.
   */
  prepare(_request: any, _response: any): void {}

  /**
   * Watches every way the response can be written (send, json, end, redirect, a stream) and
   * reports to `sink` before anything leaves. The hooks live on this one response object and
   * are removed once it is written.
   */
  abstract capture(response: any, sink: ResponseSink): void;

  /**
   * Writes a stored response now — status, headers, `Idempotent-Replayed: true`, exact bytes —
   * whatever the route's style, then makes the route's own later writes to this response no-ops
   * (Nest's reply of a normal route, a `@Redirect()`, an exception filter).
   * @throws when a stored header cannot be written; the response is then left untouched
   */
  abstract writeReplay(response: any, stored: StoredResponse): void;

  /** Status and headers set on the response so far. */
  snapshot(response: any): ResponseSnapshot {
    return { status: response.statusCode, headers: lowerCaseHeaders(response.getHeaders()) };
  }

  /** Sets a header on the answer to come (on Express, not once the headers are sent). */
  abstract setHeader(response: any, name: string, value: string): void;

  /** The Node.js response under the adapter's (its `close` says the client hung up). */
  abstract nodeResponse(response: any): ServerResponse;
}
