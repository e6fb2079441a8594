/** Name of the TypeORM DataSource of the fake provider (a foreign system: its own pool). */
export const PROVIDER_DATA_SOURCE = 'provider';

/** Injection token of the provider's simulated latency, in milliseconds. */
export const PROVIDER_LATENCY_MS = Symbol('sample-app:provider-latency-ms');

/** Customers that misbehave on purpose (SPEC §10). */
export const MISBEHAVING_CUSTOMERS = {
  declined: 'cus_declined',
  unavailableOnce: 'cus_unavailable_once',
  timeoutOnce: 'cus_timeout_once',
} as const;
