/** Injection token of the resolved module options (`ResolvedIdempotencyOptions`). */
export const IDEMPOTENCY_OPTIONS = Symbol('IDEMPOTENCY_OPTIONS');

/**
 * Injection token of the store's abilities beyond the core contract
 * (`IdempotencyStoreCapabilities`), asked of the store once, at bootstrap.
 */
export const IDEMPOTENCY_STORE_CAPABILITIES = Symbol('IDEMPOTENCY_STORE_CAPABILITIES');
