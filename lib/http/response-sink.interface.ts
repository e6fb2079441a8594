import type { OutgoingResponse } from '../utils/response-bytes';

/**
 * What a captured response reports to, and asks of, the request's lifecycle owner.
 */
export interface ResponseSink {
  /**
   * A whole response is about to be written (`undefined`: a payload that is not bytes, such as
   * a stream). Resolves to what to write instead, or `undefined` to write the original as it
   * is. Nothing is written before it settles.
   */
  onResponse(outgoing: OutgoingResponse | undefined): Promise<OutgoingResponse | undefined>;
  /**
   * The response was written without going through `onResponse` (a stream written chunk by
   * chunk, a raw socket write) and has ended. Not called when the client merely went away
   * before anything was written: a response may still come.
   */
  onResponseEnded(): void;
  /** Writing the decided response failed (an invalid header, say); the client got a 500. */
  onWriteFailed(error: unknown): void;
}

/** Status and headers a response carries at one moment (lower-case header names). */
export interface ResponseSnapshot {
  status: number;
  headers: Record<string, string | string[]>;
}
