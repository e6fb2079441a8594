import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { lowerCaseHeaders, isStreamLike, responseBytes } from '../utils/response-bytes';
import type { OutgoingResponse } from '../utils/response-bytes';
import { IdempotencyResponseAdapter } from './idempotency-response.adapter';
import { hookMethod, silenceMethods } from './method-hook';
import { replayBody, replayHeaders } from './replay-headers';
import { shareShape, sharedShapeOn } from '../internals/shared-shape';
import { REPLACED_HEADERS, ResponseCaptureState, failClosed } from './response-capture-state';
import type { ResponseSink } from './response-sink.interface';

/** Headers Express's `send` adds to a text body by itself. */
const SEND_ADDED_HEADERS = ['etag', 'content-length'];

/**
 * Methods of an Express response that write, made no-ops once a replay was written
 * (`silenceMethods` says why).
 */
const WRITERS = 'send json jsonp end write redirect sendFile render setHeader writeHead'.split(' ');

/**
 * Express 5 responses. A response ends through `res.send` (and `res.json`, which calls it),
 * through `res.end` directly (`res.redirect`, raw `@Res()` code), or chunk by chunk through
 * `res.write` (streams, `sendFile`): all three are watched.
 */
export class ExpressResponseAdapter extends IdempotencyResponseAdapter {
  /** @inheritDoc */
  readonly textContentType = 'text/html';

  private readonly sharedShape = sharedShapeOn();

  /**
   * Gives the request and the response the V8 map all of them share (`shareShape`), unless the
   * startup check said no.
   * @inheritDoc
   */
  override prepare(req: object, res: object): void {
    if (!this.sharedShape) return;
    shareShape(req);
    shareShape(res);
  }

  /** @inheritDoc */
  capture(res: any, sink: ResponseSink): void {
    const { send, end, write } = res;
    const capture = new ResponseCaptureState(sink, () => failClosed(res, end));
    /** The headers set before Express's own send ran, when it did (a text body). */
    let setBeforeSend: Set<string> | undefined;
    const replace = (decision: OutgoingResponse) => {
      res.statusCode = decision.status;
      for (const name of REPLACED_HEADERS) res.removeHeader(name);
      for (const [name, value] of Object.entries(decision.headers)) res.setHeader(name, value);
      res.setHeader('content-length', decision.body.length);
      end.call(res, decision.body);
    };

    capture.onDone(
      hookMethod(res, 'send', function (payload: unknown) {
        if (capture.state === 'pending') return res;
        // Express turns objects into JSON through res.json, which calls send again with text.
        if (
          payload !== null &&
          typeof payload === 'object' &&
          !(payload instanceof Uint8Array) &&
          !isStreamLike(payload)
        ) {
          return send.call(res, payload);
        }
        // Express writes a text body's content type its own way (its charset rewriting differs
        // between its versions), with its Content-Length and ETag: let its send work the answer
        // out, and take it where send ends it (the end hook), headers as they will be written.
        if (typeof payload === 'string') {
          setBeforeSend = new Set(res.getHeaderNames() as string[]);
          return send.call(res, payload);
        }
        const headers = lowerCaseHeaders(res.getHeaders());
        const current = headers['content-type'] as string | undefined;
        const bytes = responseBytes(payload, current, 'text/html');
        if (bytes?.contentType !== undefined) headers['content-type'] = bytes.contentType;
        const outgoing = bytes && { status: res.statusCode, headers, body: bytes.body };
        capture.handOver(outgoing, () => send.call(res, payload), replace);
        return res;
      }),
    );
    capture.onDone(
      hookMethod(res, 'end', function (chunk?: unknown, encoding?: unknown, callback?: unknown) {
        if (capture.state === 'pending') return res;
        const args = [chunk, encoding, callback];
        if (res.headersSent) {
          // Chunks went out already: this ends a stream, which cannot be stored.
          capture.finish();
          const result = end.apply(res, args);
          sink.onResponseEnded();
          return result;
        }
        const body =
          chunk === undefined || chunk === null || typeof chunk === 'function'
            ? Buffer.alloc(0)
            : Buffer.isBuffer(chunk)
              ? chunk
              : Buffer.from(
                  chunk as string,
                  typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8',
                );
        const headers = lowerCaseHeaders(res.getHeaders());
        // What Express's send adds on its own (its ETag, the length) is not the route's answer:
        // a replay's send adds them again.
        for (const name of SEND_ADDED_HEADERS) {
          if (setBeforeSend && !setBeforeSend.has(name)) delete headers[name];
        }
        const outgoing = { status: res.statusCode, headers, body };
        capture.handOver(outgoing, () => end.apply(res, args), replace);
        return res;
      }),
    );
    capture.onDone(
      hookMethod(res, 'write', function (...args: unknown[]) {
        // The first chunk of a stream: nothing to store; the lifecycle hears when it ends.
        capture.finish();
        res.once('close', () => sink.onResponseEnded());
        return write.apply(res, args);
      }),
    );
    capture.watchClose(res);
  }

  /** @inheritDoc */
  writeReplay(res: any, stored: StoredResponse): void {
    const headers = replayHeaders(stored);
    res.statusCode = stored.status;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    const body = replayBody(stored);
    if (body?.length && stored.headers['content-type'] === undefined) {
      // Raw code answered without a content type; send would add application/octet-stream.
      res.setHeader('content-length', body.length);
      res.end(body);
    } else {
      // Express's send adds Content-Length and ETag and answers HEAD and conditional requests.
      res.send(body);
    }
    silenceMethods(res, WRITERS);
  }

  /** @inheritDoc */
  setHeader(res: any, name: string, value: string): void {
    if (!res.headersSent) res.setHeader(name, value);
  }

  /** @inheritDoc */
  nodeResponse(res: any): ServerResponse {
    return res;
  }
}
