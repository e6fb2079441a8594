import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { isStreamLike, lowerCaseHeaders, responseBytes } from '../utils/response-bytes';
import type { OutgoingResponse } from '../utils/response-bytes';
import { IdempotencyResponseAdapter } from './idempotency-response.adapter';
import { hookMethod, silenceMethods } from './method-hook';
import { replayBody, replayHeaders } from './replay-headers';
import { sendsSerializedText } from '../internals/fastify-serialized-send';
import { fastifyContentType } from './wire-content-type';
import { REPLACED_HEADERS, ResponseCaptureState, failClosed } from './response-capture-state';
import type { ResponseSink } from './response-sink.interface';

/**
 * Fastify replies. Every reply Fastify writes goes through `reply.send` (`reply.redirect`
 * calls it too); code that writes to `reply.raw` itself is seen only when it ends.
 */
export class FastifyResponseAdapter extends IdempotencyResponseAdapter {
  /** @inheritDoc */
  readonly textContentType = 'text/plain';

  /** @inheritDoc */
  capture(reply: any, sink: ResponseSink): void {
    const { raw, send } = reply;
    const capture = new ResponseCaptureState(sink, () => failClosed(raw));
    const replace = (decision: OutgoingResponse) => {
      reply.code(decision.status);
      for (const name of REPLACED_HEADERS) reply.removeHeader(name);
      for (const [name, value] of Object.entries(decision.headers)) {
        // header() appends set-cookie, so the old value goes first.
        reply.removeHeader(name).header(name, value);
      }
      send.call(reply, decision.body);
    };

    capture.onDone(
      hookMethod(reply, 'send', function (payload: unknown) {
        if (capture.state === 'pending') return reply;
        const headers = lowerCaseHeaders(reply.getHeaders());
        const bytes = fastifyBytes(reply, payload, headers['content-type'] as string | undefined);
        if (bytes?.contentType !== undefined) headers['content-type'] = bytes.contentType;
        const outgoing = bytes && { status: reply.statusCode, headers, body: bytes.body };
        // The text just stored goes out as it is where Fastify would only serialize the object
        // again: the same bytes, one serialization fewer, and a toJSON() that answers
        // differently each time cannot make the first answer differ from its replays.
        const text =
          bytes?.serialized !== undefined && sendsSerializedText(reply)
            ? bytes.serialized
            : undefined;
        const writeOriginal =
          text === undefined
            ? () => send.call(reply, payload)
            : () => send.call(reply.header('content-type', headers['content-type']), text);
        capture.handOver(outgoing, writeOriginal, replace);
        return reply;
      }),
    );
    capture.watchClose(raw);
  }

  /** @inheritDoc */
  writeReplay(reply: any, stored: StoredResponse): void {
    const headers = replayHeaders(stored);
    reply.code(stored.status);
    for (const [name, value] of Object.entries(headers))
      reply.removeHeader(name).header(name, value);
    const body = replayBody(stored);
    if (body?.length && stored.headers['content-type'] === undefined) {
      // An answer without a content type (raw code on an Express instance): Fastify gives bytes
      // application/octet-stream, a stream nothing.
      reply.header('content-length', body.length).send(Readable.from([body]));
    } else {
      reply.send(body);
    }
    silenceMethods(reply, ['send', 'redirect']);
  }

  /** @inheritDoc */
  setHeader(reply: any, name: string, value: string): void {
    reply.header(name, value);
  }

  /** @inheritDoc */
  nodeResponse(reply: any): ServerResponse {
    return reply.raw;
  }
}

/** The bytes of a payload, with the text Fastify's serializer made of it, if it made one. */
type FastifyBytes = NonNullable<ReturnType<typeof responseBytes>> & { serialized?: string };

/**
 * The bytes Fastify's `reply.send` will write for `payload`. What Fastify serializes itself
 * (anything but a string, bytes, a stream or `undefined`, under no content type or a JSON one) is
 * serialized here by `reply.serialize`: the reply's serializer, the app's `setReplySerializer`
 * or the route's response schema, as Fastify will pick it, and `null` becomes `null`. A
 * `preSerialization` or `onSend` hook that changes the payload afterwards is not seen.
 */
function fastifyBytes(
  reply: any,
  payload: unknown,
  contentType: string | undefined,
): FastifyBytes | undefined {
  // A web stream or Response is piped, as a Node stream is: no bytes to store.
  if (typeof (payload as { getReader?: unknown } | null)?.getReader === 'function')
    return undefined;
  const serializedByFastify =
    payload === null ||
    typeof payload === 'number' ||
    typeof payload === 'boolean' ||
    (typeof payload === 'object' &&
      !ArrayBuffer.isView(payload) &&
      !(payload instanceof Error) &&
      !isStreamLike(payload));
  if (serializedByFastify && (contentType === undefined || /json/i.test(contentType))) {
    let text: string | Uint8Array;
    try {
      text = reply.serialize(payload);
    } catch {
      // Fastify's own send fails the same way and answers with its error: nothing to store.
      return undefined;
    }
    const type = fastifyContentType('serialized', contentType);
    return typeof text === 'string'
      ? { body: Buffer.from(text, 'utf8'), contentType: type, serialized: text }
      : { body: Buffer.from(text), contentType: type };
  }
  const bytes = responseBytes(payload, contentType, 'text/plain');
  // The content type Fastify itself will write (a `text/csv` string keeps no charset).
  const kind = typeof payload === 'string' ? 'text' : ArrayBuffer.isView(payload) && 'bytes';
  return bytes && kind ? { ...bytes, contentType: fastifyContentType(kind, contentType) } : bytes;
}
