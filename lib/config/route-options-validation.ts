import { FORBIDDEN_REPLAY_HEADERS, RESERVED_HEADER_PREFIX } from './idempotency.constants';
import { check, checkBoolean, checkRange } from './option-checks';
import type {
  FlatIdempotencyRouteOptions,
  IdempotencyWaitOptions,
} from '../interfaces/idempotency-module-options.interface';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

function headerList(value: unknown): boolean {
  return Array.isArray(value) && value.every((h) => typeof h === 'string' && TOKEN.test(h));
}

/**
 * Checks the route-level options that are present (flattened from their groups) and normalises
 * header names to lower case.
 *
 * @param options - a full or partial set of route options
 * @returns a copy with header lists lower-cased
 * @throws IdempotencyConfigurationError naming the first wrong option and how to fix it
 */
export function validateRouteOptions<T extends FlatIdempotencyRouteOptions>(options: T): T {
  const o: any = { ...options };
  if ('header' in o) {
    check(
      typeof o.header === 'string' && TOKEN.test(o.header),
      'header',
      o.header,
      'Use an HTTP header name such as "Idempotency-Key".',
    );
  }
  if ('required' in o) o.required = checkBoolean('required', o.required);
  if ('transactional' in o) o.transactional = checkBoolean('transactional', o.transactional);
  if ('storeBody' in o) o.storeBody = checkBoolean('storeBody', o.storeBody);
  for (const option of [
    'ttlSeconds',
    'lockTimeoutSeconds',
    'maxLockHoldSeconds',
    'maxRequestBytes',
    'maxResponseBytes',
  ] as const) {
    if (option in o) o[option] = checkRange(option, o[option]);
  }
  if ('scope' in o) {
    check(typeof o.scope === 'function', 'scope', o.scope, 'Use a function (request) => string.');
  }
  if ('retryAfterSeconds' in o)
    o.retryAfterSeconds = checkRange('retryAfterSeconds', o.retryAfterSeconds);
  if ('fingerprintHeaders' in o) {
    check(
      headerList(o.fingerprintHeaders),
      'fingerprintHeaders',
      o.fingerprintHeaders,
      'Use an array of header names, e.g. ["x-account-id"].',
    );
    o.fingerprintHeaders = o.fingerprintHeaders.map((h: string) => h.toLowerCase());
  }
  if ('replayHeaders' in o) {
    check(
      headerList(o.replayHeaders),
      'replayHeaders',
      o.replayHeaders,
      'Use an array of header names, e.g. ["content-type", "location"].',
    );
    o.replayHeaders = o.replayHeaders.map((h: string) => h.toLowerCase());
    const refused = o.replayHeaders.find(
      (h: string) => FORBIDDEN_REPLAY_HEADERS.has(h) || h.startsWith(RESERVED_HEADER_PREFIX),
    );
    check(
      refused === undefined,
      'replayHeaders',
      o.replayHeaders,
      `"${refused}" cannot be replayed: it belongs to one connection or one response. Remove it.`,
    );
  }
  if ('wait' in o) o.wait = checkWait(o.wait);
  if ('storeStatuses' in o) {
    check(
      Array.isArray(o.storeStatuses) &&
        o.storeStatuses.every(
          (s: unknown) => Number.isInteger(s) && (s as number) >= 100 && (s as number) <= 599,
        ),
      'storeStatuses',
      o.storeStatuses,
      'Use an array of HTTP status codes (whole numbers from 100 to 599).',
    );
  }
  return o as T;
}

const WAIT_FIELDS = ['maxSeconds', 'defaultSeconds', 'pollIntervalSeconds'] as const;

/**
 * Checks the `wait` fields that are present (a route's may name only some) and refuses any other.
 * @returns a copy, numbers from the environment converted
 */
export function checkWait(given: unknown): Partial<IdempotencyWaitOptions> {
  const fix =
    'Use an object such as { maxSeconds: 10 }, or leave it out (no waiting: 409 at once).';
  check(typeof given === 'object' && given !== null && !Array.isArray(given), 'wait', given, fix);
  const wait: Record<string, unknown> = { ...(given as object) };
  const unknown = Object.keys(wait).find(
    (name) => !(WAIT_FIELDS as readonly string[]).includes(name),
  );
  check(unknown === undefined, `wait.${unknown}`, wait[unknown!], `Use ${WAIT_FIELDS.join(', ')}.`);
  for (const field of WAIT_FIELDS) {
    if (wait[field] !== undefined) wait[field] = checkRange(`wait.${field}`, wait[field]);
  }
  return wait as Partial<IdempotencyWaitOptions>;
}
