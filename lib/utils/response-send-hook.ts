import type { StoredResponse } from '../interfaces/idempotency-record.interface';

/**
 * The response a handler is about to send, as it will go on the wire: final status, every
 * header set so far (lower-case names), the content type the adapter would pick, and the bytes.
 */
export type OutgoingResponse = StoredResponse;

/** What the hook's owner wants sent instead of, or as, the captured response. */
export type SendDecision = (
  outgoing: OutgoingResponse | undefined,
) => Promise<OutgoingResponse | undefined>;

/** Callbacks of one installed hook. */
export interface SendHookCallbacks {
  /**
   * Called once with what is about to be sent (`undefined` for a payload that is not bytes, such
   * as a stream). Resolves to what to send: the same response, another one, or `undefined` to
   * let the original payload through untouched. Nothing is written before it settles.
   */
  decide: SendDecision;
  /**
   * Called when the response was finished without ever going through `send` (a stream, SSE,
   * `@Res()`). Not called when the client disconnects first: `send` may still come.
   */
  bypassed: () => void;
}

function isFastifyReply(res: any): boolean {
  return typeof res?.code === 'function' && res.raw !== undefined && typeof res.send === 'function';
}

function lowerCaseHeaders(headers: Record<string, unknown>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.map(String) : String(value);
  }
  return out;
}

function withUtf8Charset(contentType: string): string {
  return /;\s*charset=/i.test(contentType) ? contentType : `${contentType}; charset=utf-8`;
}

/**
 * Turns a payload handed to `send` into bytes and a content type, the way the adapter would by
 * default. Objects become `JSON.stringify` text; strings get `charset=utf-8`.
 * @returns undefined for payloads that are not bytes (streams, errors)
 */
function toBytes(
  payload: unknown,
  contentType: string | undefined,
  textDefault: string,
): { body: Buffer; contentType: string | undefined } | undefined {
  if (payload === undefined || payload === null) return { body: Buffer.alloc(0), contentType };
  if (Buffer.isBuffer(payload) || payload instanceof Uint8Array) {
    return { body: Buffer.from(payload), contentType: contentType ?? 'application/octet-stream' };
  }
  if (typeof payload === 'string') {
    return {
      body: Buffer.from(payload, 'utf8'),
      contentType: withUtf8Charset(contentType ?? textDefault),
    };
  }
  if (typeof (payload as any).pipe === 'function' || payload instanceof Error) return undefined;
  if (typeof payload === 'object' || typeof payload === 'number' || typeof payload === 'boolean') {
    return {
      body: Buffer.from(JSON.stringify(payload), 'utf8'),
      contentType: withUtf8Charset(contentType ?? 'application/json'),
    };
  }
  return undefined;
}

/**
 * Hooks the adapter's `send` on one response (Express `res.send`, Fastify `reply.send`), so the
 * exact bytes, status and headers can be stored before anything reaches the client, and a stored
 * response can be sent in their place. Works at the last step of the pipeline: whatever outer
 * interceptors and exception filters produced is what is captured.
 *
 * @param res - the adapter's response object
 * @param callbacks - what to do with the captured response
 */
export function installSendHook(res: any, callbacks: SendHookCallbacks): void {
  const fastify = isFastifyReply(res);
  const raw = fastify ? res.raw : res;
  const original = res.send;
  let state: 'idle' | 'pending' | 'done' = 'idle';

  const restore = () => {
    if (res.send !== original) delete res.send;
    raw.removeListener?.('close', onClose);
  };
  const onClose = () => {
    if (state !== 'idle') return;
    // Closed before anything was sent: the client went away (a timeout, a dropped connection)
    // while the handler runs. The handler goes on and may still act, so the hook stays in place
    // to store its response, and the client's retry gets it instead of a second execution.
    if (!raw.writableFinished) return;
    state = 'done';
    restore();
    callbacks.bypassed();
  };

  const writeOut = (outgoing: OutgoingResponse) => {
    if (fastify) res.code(outgoing.status);
    else res.statusCode = outgoing.status;
    for (const [name, value] of Object.entries(outgoing.headers)) {
      if (String(res.getHeader(name)) === String(value)) continue;
      // Node's own setHeader: Express's res.set() would rewrite Content-Type. Fastify's
      // header() appends set-cookie, so the old value goes first.
      if (fastify) res.removeHeader(name).header(name, value);
      else res.setHeader(name, value);
    }
    return original.call(res, outgoing.body);
  };

  const hooked = function (this: any, payload: unknown) {
    if (state === 'pending') return res;
    if (state === 'done') return original.call(res, payload);
    // Express turns objects into JSON and calls send again with the text.
    if (
      !fastify &&
      payload !== null &&
      typeof payload === 'object' &&
      !Buffer.isBuffer(payload) &&
      !(payload instanceof Uint8Array) &&
      typeof (payload as any).pipe !== 'function'
    ) {
      return original.call(res, payload);
    }
    state = 'pending';
    const headers = lowerCaseHeaders(fastify ? res.getHeaders() : res.getHeaders());
    const bytes = toBytes(
      payload,
      headers['content-type'] as string | undefined,
      fastify ? 'text/plain' : 'text/html',
    );
    let outgoing: OutgoingResponse | undefined;
    if (bytes) {
      if (bytes.contentType !== undefined) headers['content-type'] = bytes.contentType;
      outgoing = { status: fastify ? res.statusCode : raw.statusCode, headers, body: bytes.body };
    }
    // A decision that fails sends the original payload rather than nothing.
    callbacks
      .decide(outgoing)
      .catch(() => undefined)
      .then((decision) => {
        state = 'done';
        restore();
        if (decision) writeOut(decision);
        else original.call(res, payload);
      });
    return res;
  };
  res.send = hooked;
  raw.once?.('close', onClose);
}
