import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import { BodyTooLargeError, fingerprintRequest } from '../utils/fingerprint';

/**
 * Fingerprints one request (Express or Fastify) for a scope.
 *
 * A body the application did not parse (no parser for its content type, `rawBody` off) cannot be
 * compared with a retry's: such a request is refused with 415 rather than fingerprinted on
 * anything less than its bytes.
 *
 * @throws IdempotencyProblemException `idempotency_body_unreadable` for an unparsed body,
 *   `idempotency_request_too_large` for a body over the route's `maxRequestBytes`
 */
export function fingerprintOf(
  request: any,
  route: ResolvedIdempotencyRouteOptions,
  scope: string,
): string {
  const declared = Number(request.headers['content-length']);
  const size = request.rawBody?.length ?? (Number.isFinite(declared) ? declared : 0);
  // Refused before anything is parsed further or claimed: a body this large is not hashed.
  if (size > route.maxRequestBytes) {
    throw IdempotencyProblemException.requestTooLarge(route.maxRequestBytes);
  }
  const url = request.originalUrl ?? request.url;
  try {
    return fingerprintRequest({
      scope,
      method: request.method,
      url,
      body: parsedBody(request),
      rawBody: request.rawBody,
      contentType: request.headers['content-type'],
      headers: route.fingerprintHeaders.map((name) => {
        const value = request.headers[name];
        return [name, Array.isArray(value) ? value.join(', ') : value];
      }),
      maxBodyBytes: route.maxRequestBytes,
    });
  } catch (error) {
    // A body sent without a length (chunked) is measured as it is fingerprinted.
    if (error instanceof BodyTooLargeError) {
      throw IdempotencyProblemException.requestTooLarge(route.maxRequestBytes);
    }
    throw error;
  }
}

/** Whether the request carries a body that nobody parsed. */
function hasUnparsedBody(request: any): boolean {
  if (request.body !== undefined || request.rawBody) return false;
  const length = Number(request.headers['content-length'] ?? 0);
  // A chunked body has no length but is a body all the same.
  return length > 0 || request.headers['transfer-encoding'] !== undefined;
}

function parsedBody(request: any): unknown {
  if (hasUnparsedBody(request)) {
    throw IdempotencyProblemException.bodyUnreadable(
      String(request.headers['content-type'] ?? 'none'),
    );
  }
  return request.body;
}
