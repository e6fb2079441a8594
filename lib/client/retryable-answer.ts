/** The 409 code that means "the first request with this key is still running": worth waiting. */
const KEY_IN_USE = 'idempotency_key_in_use';

/**
 * Whether an answer is worth another attempt with the same key: 408, 429, a 5xx (but 501 and
 * 505, which no retry changes), and a 409 whose code is `idempotency_key_in_use` (problem+json
 * `code`, or `error.code` in a Stripe-style body made with the server's `errorBody`). Every
 * other answer is final — 2xx, 400, 402, 404, 422, another 409 (an abandoned operation, the
 * application's own conflict) — and is returned as it is.
 *
 * @param status - the answer's status
 * @param body - its parsed body
 */
export function isRetryableAnswer(status: number, body: unknown): boolean {
  if (status === 408 || status === 429) return true;
  if (status === 409) return codeOf(body) === KEY_IN_USE;
  return status >= 500 && status <= 599 && status !== 501 && status !== 505;
}

function codeOf(body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return undefined;
  const { code, error } = body as { code?: unknown; error?: { code?: unknown } };
  return code ?? (typeof error === 'object' && error !== null ? error.code : undefined);
}
