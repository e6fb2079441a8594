import { BODY_OMITTED_HEADER } from '../config/idempotency.constants';
import type {
  IdempotencyRunSettings,
  StoredResponse,
} from '../interfaces/idempotency-record.interface';

const NO_BODY = Buffer.alloc(0);

/**
 * What is kept of a final response: its status, the headers in `replayHeaders`, and its body
 * unless the route keeps no body (`storeBody: false`) or the body is over `maxResponseBytes`.
 * A record kept without its body says why in a reserved stored header, so that a retry is told
 * the operation completed instead of being handed an empty body.
 */
export function storedResponseOf(
  response: StoredResponse,
  settings: IdempotencyRunSettings,
): StoredResponse {
  const headers: StoredResponse['headers'] = {};
  for (const name of settings.replayHeaders) {
    const value = response.headers[name];
    if (value !== undefined) headers[name] = value;
  }
  const omitted =
    settings.storeBody === false
      ? 'not_kept'
      : settings.maxResponseBytes !== undefined && response.body.length > settings.maxResponseBytes
        ? 'too_large'
        : undefined;
  if (!omitted) return { status: response.status, headers, body: response.body };
  headers[BODY_OMITTED_HEADER] = omitted;
  return { status: response.status, headers, body: NO_BODY };
}

/** Why a stored record has no body, when it was kept without one. */
export function omittedBodyOf(stored: StoredResponse): 'too_large' | 'not_kept' | undefined {
  const reason = stored.headers[BODY_OMITTED_HEADER];
  return reason === 'too_large' || reason === 'not_kept' ? reason : undefined;
}
