/** A request body in its wire form, made once and sent unchanged by every attempt. */
export interface EncodedBody {
  /** The bytes (or the string) to send; absent for no body. */
  payload?: string | Uint8Array;
  /**
   * The content type the body implies: `application/json` for JSON, what `fetch` itself would
   * send for the others (`text/plain;charset=UTF-8`, a form's multipart boundary, a `Blob`'s
   * type); absent when it implies none (bytes, a stream). A request's own header replaces it.
   */
  contentType?: string;
}

/**
 * Bodies `fetch` sends as they are, by the name of their class (looked up on `globalThis`, so an
 * environment without one of them simply has no such bodies).
 */
const FETCH_BODY_CLASSES = ['URLSearchParams', 'Blob', 'FormData', 'ReadableStream'] as const;

/**
 * Whether `fetch` takes `body` as it is: a string, `URLSearchParams`, a `Blob` (a `File`),
 * `FormData`, a `ReadableStream`, an `ArrayBuffer` or a view of one (a `Buffer`, a typed array).
 */
export function isFetchBody(body: unknown): boolean {
  if (typeof body === 'string' || body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
    return true;
  }
  return FETCH_BODY_CLASSES.some((name) => {
    const type = (globalThis as Record<string, unknown>)[name];
    return typeof type === 'function' && body instanceof type;
  });
}

/**
 * Turns a request's `body` into the bytes every attempt sends. What `fetch` takes as a body is
 * sent as `fetch` would send it, with `fetch`'s own content type; anything else (plain objects,
 * arrays, numbers, `null`, objects with `toJSON`) as JSON. It is encoded once, not per attempt:
 * `fetch` draws a new multipart boundary each time it sends a `FormData`, and a stream can be read
 * only once, so sending the original again would change the bytes the server fingerprints (or
 * send none).
 *
 * @returns the payload and the content type it implies
 * @throws what reading the body throws (a stream that errors, say), before any attempt
 */
export async function encodeRequestBody(body: unknown): Promise<EncodedBody> {
  if (body === undefined) return {};
  if (typeof body === 'string') return { payload: body, contentType: 'text/plain;charset=UTF-8' };
  if (!isFetchBody(body)) return { payload: JSON.stringify(body), contentType: 'application/json' };
  // `Response` encodes a body exactly as `fetch` does, content type included.
  const encoded = new Response(body as ConstructorParameters<typeof Response>[0]);
  const contentType = encoded.headers.get('content-type') ?? undefined;
  return { payload: new Uint8Array(await encoded.arrayBuffer()), contentType };
}
