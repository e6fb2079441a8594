import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import { BodyTooLargeError, fingerprintRequest } from '../utils/fingerprint';
import type { FingerprintInput } from '../utils/fingerprint';
import { routeLabelOf } from '../utils/route-label';
import type { UnparsedContentTypeWarnings } from '../utils/unparsed-content-types';

/**
 * Fingerprints one request (Express or Fastify) for a scope.
 *
 * A body the application did not parse (no parser for its content type, `rawBody` off) cannot be
 * compared with a retry's: such a request is refused with 415 rather than fingerprinted on
 * anything less than its bytes.
 *
 * @param unparsed - warned about the media type of a body nobody parsed
 * @throws IdempotencyProblemException `idempotency_body_unreadable` for an unparsed body,
 *   `idempotency_request_too_large` for a body over the route's `maxRequestBytes`
 */
export function fingerprintOf(
  request: any,
  route: ResolvedIdempotencyRouteOptions,
  scope: string,
  unparsed: UnparsedContentTypeWarnings,
): string {
  const declared = Number(request.headers['content-length']);
  const size = request.rawBody?.length ?? (Number.isFinite(declared) ? declared : 0);
  // Refused before anything is parsed further or claimed: a body this large is not hashed.
  if (size > route.maxRequestBytes) {
    throw IdempotencyProblemException.requestTooLarge(route.maxRequestBytes);
  }
  return fingerprintWithin(route, {
    scope,
    method: request.method,
    url: request.originalUrl ?? request.url,
    body: parsedBody(request, unparsed),
    rawBody: request.rawBody,
    contentType: request.headers['content-type'],
    headers: route.fingerprintHeaders.map((name) => {
      const value = request.headers[name];
      return [name, Array.isArray(value) ? value.join(', ') : value];
    }),
    maxBodyBytes: route.maxRequestBytes,
  });
}

/**
 * `fingerprintRequest()`, with a body over the route's `maxRequestBytes` refused (413): one sent
 * without a length (chunked), or a call's data, is measured as it is fingerprinted.
 */
export function fingerprintWithin(
  route: ResolvedIdempotencyRouteOptions,
  input: FingerprintInput,
): string {
  try {
    return fingerprintRequest(input);
  } catch (error) {
    if (!(error instanceof BodyTooLargeError)) throw error;
    throw IdempotencyProblemException.requestTooLarge(route.maxRequestBytes);
  }
}

/** The request's parsed body; a body that nobody parsed is refused (415), and warned about. */
function parsedBody(request: any, unparsed: UnparsedContentTypeWarnings): unknown {
  if (request.body !== undefined || request.rawBody) return request.body;
  const length = Number(request.headers['content-length'] ?? 0);
  // A chunked body has no length but is a body all the same.
  if (length > 0 || request.headers['transfer-encoding'] !== undefined) {
    unparsed.warn(request.headers['content-type'], routeLabelOf(request));
    throw IdempotencyProblemException.bodyUnreadable(
      String(request.headers['content-type'] ?? 'none'),
    );
  }
  return request.body;
}
