import type { ChaosRequest } from './chaos-client';

/** What a key must end as. */
export type KeyOutcome = 'payment' | 'declined' | 'refund' | 'not_found';

/** The final status each outcome is answered (and replayed) with. */
export const FINAL_STATUS: Record<KeyOutcome, number> = {
  payment: 201,
  declined: 402,
  refund: 201,
  not_found: 404,
};

/** One idempotency key of one account, the request sent with it, and what it must end as. */
export interface KeyPlan {
  account: string;
  key: string;
  request: ChaosRequest & { account: string; key: string };
  expect: KeyOutcome;
  /** 5xx answers the handler itself may give for this key (the provider's misbehaving
   *  customers), by status and `error.code`. Anything else 5xx is a violation. */
  handler5xx?: { status: number; code: string }[];
  /** For a refund: the payment it refunds. */
  paymentId?: string;
  /**
   * The client sent the key once and gave up, whatever it got (a crash cut it off): nobody but
   * the completer can finish it. It needs no final answer from the load, and the first final
   * retry of the verification must already be a replay.
   */
  noRetry?: boolean;
}

/** Customers of the fake provider that misbehave on purpose (docs/sample-app.md). */
export const MISBEHAVING = {
  declined: 'cus_declined',
  unavailableOnce: 'cus_unavailable_once',
  timeoutOnce: 'cus_timeout_once',
} as const;

/**
 * A `POST /payments` key. The key goes into `description`, so its payment row can be found.
 *
 * @param customerId - defaults to a customer of its own (`cus_<key>`)
 */
export function paymentPlan(
  account: string,
  key: string,
  options: { customerId?: string; amount?: number } = {},
): KeyPlan {
  const customerId = options.customerId ?? `cus_${key}`;
  const plan: KeyPlan = {
    account,
    key,
    request: {
      method: 'POST',
      path: '/payments',
      account,
      key,
      body: { amount: options.amount ?? 1000, currency: 'eur', customerId, description: key },
    },
    expect: customerId === MISBEHAVING.declined ? 'declined' : 'payment',
  };
  if (customerId === MISBEHAVING.unavailableOnce) {
    // The charge step asks to be retried later: the library's 503 problem+json.
    plan.handler5xx = [{ status: 503, code: 'idempotency_retry_later' }];
  }
  if (customerId === MISBEHAVING.timeoutOnce) {
    plan.handler5xx = [{ status: 504, code: 'provider_timeout' }];
  }
  return plan;
}

/**
 * A `POST /payments/:id/refunds` key.
 * @param expect - `refund` when the payment is the account's, `not_found` otherwise
 */
export function refundPlan(
  account: string,
  key: string,
  paymentId: string,
  amount: number,
  expect: 'refund' | 'not_found',
): KeyPlan {
  return {
    account,
    key,
    request: {
      method: 'POST',
      path: `/payments/${paymentId}/refunds`,
      account,
      key,
      body: { amount },
    },
    expect,
    paymentId,
  };
}

/** `account\u0000key`: identifies a key (keys are unique per account). */
export function planId(account: string, key: string): string {
  return `${account}\u0000${key}`;
}
