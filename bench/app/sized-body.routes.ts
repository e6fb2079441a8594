/** The body sizes the encryption phase measures, in bytes; the route takes any up to 1 MiB. */
export const SIZED_BODY_BYTES = [1024, 65_536] as const;

/**
 * Where the two `IdempotencyModule` instances of the encryption phase serve `POST /<prefix>/:bytes`:
 * `sized` in the clear, `sealed` with `encryption`.
 */
export const SIZED_BODY_PREFIXES = { clear: 'sized', sealed: 'sealed' } as const;
