/** The header that names the calling account (a stand-in for real authentication). */
export const ACCOUNT_HEADER = 'x-account-id';

/**
 * Reads the account id of a request, on Express and Fastify alike.
 * @returns the trimmed header value, or `undefined` when absent or empty
 */
export function readAccountId(request: { headers: Record<string, unknown> }): string | undefined {
  const raw = request.headers[ACCOUNT_HEADER];
  const value = Array.isArray(raw) ? raw[0] : raw;
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
}
