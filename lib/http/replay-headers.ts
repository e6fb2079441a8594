import { validateHeaderName, validateHeaderValue } from 'node:http';
import { IDEMPOTENT_REPLAYED_HEADER } from '../config/idempotency.constants';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';

/** The header every replay carries, as it is written. */
const REPLAYED = IDEMPOTENT_REPLAYED_HEADER.toLowerCase();

/**
 * Headers already checked, by the stored response they came from: a response the replay cache
 * holds is the same object at every replay, and never changes, so it is checked once.
 */
const checked = new WeakMap<StoredResponse, Readonly<Record<string, string | string[]>>>();

/**
 * The headers a replay sends, checked before anything is written: a stored header that can't
 * be written (a record edited by hand) fails the replay without touching the response.
 * @returns the headers, not to be changed (the same object for the same stored response)
 */
export function replayHeaders(stored: StoredResponse): Readonly<Record<string, string | string[]>> {
  const known = checked.get(stored);
  if (known) return known;
  const headers = { ...stored.headers, [REPLAYED]: 'true' };
  for (const [name, value] of Object.entries(headers)) {
    validateHeaderName(name);
    for (const one of Array.isArray(value) ? value : [value]) validateHeaderValue(name, one);
  }
  checked.set(stored, headers);
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
