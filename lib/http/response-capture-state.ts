import type { OutgoingResponse } from '../utils/response-bytes';
import type { ResponseSink } from './response-sink.interface';

/**
 * Headers that describe the route's own response and must not go out with another one that
 * replaces it (a 409 or 503 problem): other headers (CORS, say) are kept.
 */
export const REPLACED_HEADERS: readonly string[] = (
  'location set-cookie etag last-modified content-location content-language ' +
  'content-disposition content-length'
).split(' ');

/**
 * The part of capturing a response both adapters share: one response is handed to the sink at
 * most once, nothing is written while the sink decides, and a write that throws is reported
 * and answered with a bare 500 instead of becoming an unhandled rejection.
 */
export class ResponseCaptureState {
  /** `idle`: nothing written yet; `pending`: the sink decides; `done`: hooks removed. */
  state: 'idle' | 'pending' | 'done' = 'idle';
  private readonly restores: (() => void)[] = [];

  /**
   * @param sink - the request's lifecycle owner
   * @param failClosed - ends the response with a 500 (or destroys it when headers went out)
   */
  constructor(
    private readonly sink: ResponseSink,
    private readonly failClosed: () => void,
  ) {}

  /** Registers the function that removes one hook. */
  onDone(restore: () => void): void {
    this.restores.push(restore);
  }

  /** Removes every hook; later writes go straight to the adapter. */
  finish(): void {
    this.state = 'done';
    for (const restore of this.restores.splice(0)) restore();
  }

  /**
   * Hands a whole response to the sink and writes what it decides.
   * @param outgoing - the response about to be written, or undefined when it is not bytes
   * @param writeOriginal - writes the response as the route meant it
   * @param writeReplacement - writes another response the sink decided on
   */
  handOver(
    outgoing: OutgoingResponse | undefined,
    writeOriginal: () => void,
    writeReplacement: (decision: OutgoingResponse) => void,
  ): void {
    this.state = 'pending';
    const write = (decision: OutgoingResponse | undefined) => {
      try {
        this.finish();
        if (!decision || decision === outgoing) writeOriginal();
        else writeReplacement(decision);
      } catch (error) {
        try {
          this.sink.onWriteFailed(error);
          this.failClosed();
        } catch (failure) {
          this.sink.onWriteFailed(failure);
        }
      }
    };
    // One `then()` with both branches (every response comes through here): a decision that
    // fails still lets the route's own response out.
    this.sink.onResponse(outgoing).then(write, () => write(undefined));
  }

  /**
   * Reports a response that ended without being handed over (written by raw code). A close
   * with nothing written means the client went away, and a response may still come.
   * @param raw - Node's `ServerResponse`
   */
  watchClose(raw: any): void {
    const onClose = () => {
      if (this.state !== 'idle' || !raw.writableFinished) return;
      this.finish();
      this.sink.onResponseEnded();
    };
    raw.once('close', onClose);
    this.onDone(() => raw.removeListener('close', onClose));
  }
}

/**
 * Answers with a bare 500 when a decided response could not be written, or cuts the connection
 * when its headers already went out.
 * @param raw - Node's `ServerResponse`
 * @param end - its `end`, as it was before any hook
 */
export function failClosed(raw: any, end: (...args: unknown[]) => unknown = raw.end): void {
  if (raw.headersSent) {
    raw.destroy();
    return;
  }
  for (const name of raw.getHeaderNames()) raw.removeHeader(name);
  raw.statusCode = 500;
  end.call(raw);
}
