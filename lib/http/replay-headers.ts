import { validateHeaderName, validateHeaderValue } from 'node:http';
import { IDEMPOTENT_REPLAYED_HEADER } from '../idempotency.constants';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';

/**
 * The headers a replay sends, checked before anything is written: a stored header that can't
 * be written (a record edited by hand) fails the replay without touching the response.
 */
export function replayHeaders(stored: StoredResponse): Record<string, string | string[]> {
  const headers = { ...stored.headers, [IDEMPOTENT_REPLAYED_HEADER.toLowerCase()]: 'true' };
  for (const [name, value] of Object.entries(headers)) {
    validateHeaderName(name);
    for (const one of Array.isArray(value) ? value : [value]) validateHeaderValue(name, one);
  }
  return headers;
}

/**
 * The body a replay hands to the adapter: an empty body without a content type goes as no
 * body at all, so the adapter does not give it one (a 303 or 204 had none).
 */
export function replayBody(stored: StoredResponse): Buffer | undefined {
  return stored.body.length === 0 && stored.headers['content-type'] === undefined
    ? undefined
    : stored.body;
}
