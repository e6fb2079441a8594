/** The body sizes the encryption phase measures, in bytes; the route takes any up to 1 MiB. */
export const SIZED_BODY_BYTES = [1024, 65_536] as const;

/**
 * Where the encryption phase's route is, `POST /<prefix>/:bytes`, by its server's idempotency
 * configuration: `sized` on the `clear` server, `sealed` on the one with `encryption`.
 */
export const SIZED_BODY_PREFIXES = { clear: 'sized', sealed: 'sealed' } as const;
