/**
 * An operation that ended without an answer: every attempt failed on the network or timed out,
 * or the deadline passed with none. Whether the server acted is unknown: retry later with the
 * same `idempotencyKey` (given back here) and the same body, never with a new key.
 */
export class IdempotentRequestError extends Error {
  /** Always `'IdempotentRequestError'`, so it can be told apart after serialisation. */
  override readonly name = 'IdempotentRequestError';

  constructor(
    message: string,
    /** The operation's key: the one to retry with. */
    readonly idempotencyKey: string,
    /** Attempts made. */
    readonly attempts: number,
    /** The last attempt's error. */
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
