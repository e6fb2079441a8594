/** Injection token of the provider's simulated latency, in milliseconds. */
export const PROVIDER_LATENCY_MS = Symbol('sample-app:provider-latency-ms');

/** Customers that misbehave on purpose (docs/sample-app.md). */
export const MISBEHAVING_CUSTOMERS = {
  declined: 'cus_declined',
  unavailableOnce: 'cus_unavailable_once',
  timeoutOnce: 'cus_timeout_once',
} as const;

/**
 * Injection token of the longest a charge may take before `POST /payments` gives up on it for
 * now (503, retried later). It must fit in the lease: see `chargeTimeoutSeconds()`.
 */
export const PROVIDER_CHARGE_TIMEOUT_SECONDS = Symbol('sample-app:provider-charge-timeout-seconds');

/**
 * The charge step's timeout and the lease margin the library keeps before a foreign step, sized
 * to the lease (`IDEMPOTENCY_LOCK_TIMEOUT_SECONDS`): a foreign step does not start unless its
 * timeout plus the margin is left of the lease. 10 s and 2 s with the default 60 s lease; 60 %
 * and 20 % of a short test lease.
 */
export function chargeTiming(lockTimeoutSeconds: number): {
  timeoutSeconds: number;
  marginSeconds: number;
} {
  return {
    timeoutSeconds: Math.min(10, lockTimeoutSeconds * 0.6),
    marginSeconds: Math.min(2, lockTimeoutSeconds * 0.2),
  };
}
