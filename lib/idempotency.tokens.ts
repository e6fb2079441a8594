/** Injection token of the resolved module options (`ResolvedIdempotencyOptions`). */
export const IDEMPOTENCY_OPTIONS = Symbol('IDEMPOTENCY_OPTIONS');
