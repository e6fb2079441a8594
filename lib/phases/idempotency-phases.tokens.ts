/** Injection token of the resolved `IdempotencyPhasesModule` options. */
export const IDEMPOTENCY_PHASES_OPTIONS = Symbol('IDEMPOTENCY_PHASES_OPTIONS');
