/**
 * Injection token of the provider webhook's signing secrets (`WEBHOOK_SECRET`, split at commas:
 * the new and the old secret while rotating).
 */
export const PROVIDER_WEBHOOK_SECRETS = Symbol('PROVIDER_WEBHOOK_SECRETS');
