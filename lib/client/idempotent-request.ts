/** One logical operation sent by `IdempotentClient.request()`. */
export interface IdempotentRequest {
  /** @defaultValue `'POST'` */
  method?: string;
  /** Resolved against the client's `baseUrl`, e.g. `/payments`. */
  path: string;
  /**
   * The body. What `fetch` takes as a body (a string, `URLSearchParams`, a `Blob`, an
   * `ArrayBuffer` or typed array, `FormData`, a `ReadableStream`) is sent as `fetch` sends it,
   * with `fetch`'s own content type; anything else (plain objects, arrays) as JSON with
   * `Content-Type: application/json`. A `Content-Type` in `headers` (any case) replaces either.
   * Encoded once, so every attempt carries the same bytes — the server compares them with the
   * first attempt's.
   */
  body?: unknown;
  /**
   * This request's own headers. Names are case-insensitive: each replaces the client's header of
   * the same name in any case. An `Idempotency-Key` (the client's `keyHeader`, any case) here is
   * the operation's key, as `idempotencyKey` is.
   */
  headers?: Record<string, string>;
  /**
   * The operation's key. Give one you stored with the operation (an order id, say) to carry a
   * retry across restarts of your process; the request's own key header, else a new UUID v4,
   * otherwise. Giving a different key in `headers` too is refused (TypeError).
   */
  idempotencyKey?: string;
  /** Cancels the operation: the attempt in flight and any wait. */
  signal?: AbortSignal;
}

/** The final answer to an operation. */
export interface IdempotentResponse<T = unknown> {
  /** The HTTP status of the final answer. */
  status: number;
  /** `status` is 2xx. */
  ok: boolean;
  /** The final answer's headers. */
  headers: Headers;
  /** The body: parsed when its content type is JSON (`application/json`, `…+json`), else text. */
  body: T;
  /** The answer is the server's stored answer to an earlier attempt (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** How many attempts were made, this one included. */
  attempts: number;
  /** The key every attempt carried. */
  idempotencyKey: string;
}
