import { IDEMPOTENT_REPLAYED_HEADER } from '../config/idempotency.constants';
import type { IdempotencyKeySource } from '../decorators/idempotency-key-source';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';

// The headers an idempotent route's documentation adds: the key, `Prefer`, and the replay's.

/**
 * The key syntax of `parseIdempotencyKey`: 1–255 printable ASCII characters, either bare (no
 * comma, not starting with a quote or a space) or as an RFC 8941 string (`"…"`, where only `\"`
 * and `\\` are escapes).
 */
const KEY_PATTERN =
  '^(?:[\\x21\\x23-\\x2B\\x2D-\\x7E][\\x20-\\x2B\\x2D-\\x7E]{0,254}|"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\["\\\\]){1,255}")$';

const KEY_EXAMPLE = '8e03978e-40d5-43e8-bc93-6894a57f9324';

/**
 * The request headers of a route, in the shape `@ApiHeader()` gives them: the key header, or the
 * headers of the route's own key source (a webhook's signature), and `Prefer` on a route that
 * may wait.
 */
export function requestParameters(
  route: ResolvedIdempotencyRouteOptions,
  source: IdempotencyKeySource,
): Record<string, unknown>[] {
  return [
    ...(source.openApi?.parameters ?? [keyParameter(route)]),
    ...(route.wait.maxSeconds > 0 ? [preferParameter(route)] : []),
  ];
}

/** The key header parameter, in the shape `@ApiHeader()` gives it. */
function keyParameter(route: ResolvedIdempotencyRouteOptions): Record<string, unknown> {
  const use = route.required
    ? 'Required: a request without it is refused (400 idempotency_key_missing).'
    : 'Optional: a request without it runs without idempotency protection.';
  return {
    name: route.header,
    in: 'header',
    required: route.required,
    description:
      'A unique key per logical operation (a UUID v4 is a good choice), reused unchanged on ' +
      'every retry of that operation: the first request runs, a retry gets its stored response ' +
      '(with Idempotent-Replayed: true). 1 to 255 printable ASCII characters; a bare key may not ' +
      'contain a comma; an RFC 8941 string ("…", escapes \\" and \\\\) names the same key as its ' +
      `content. ${use}`,
    schema: { type: 'string', minLength: 1, pattern: KEY_PATTERN, example: KEY_EXAMPLE },
  };
}

/**
 * The `Prefer` request header of a route that may wait (RFC 7240 `wait`), in the shape
 * `@ApiHeader()` gives it. No `pattern`: the header may carry other preferences too.
 */
function preferParameter(route: ResolvedIdempotencyRouteOptions): Record<string, unknown> {
  const { maxSeconds, defaultSeconds } = route.wait;
  const without =
    defaultSeconds > 0
      ? `Without it, such a duplicate waits ${defaultSeconds} s; wait=0 asks not to wait.`
      : 'Without it, such a duplicate gets 409 at once.';
  return {
    name: 'Prefer',
    in: 'header',
    required: false,
    description:
      `Optional (RFC 7240): wait=N asks to wait up to N seconds (capped at ${maxSeconds}, the ` +
      `route's wait.maxSeconds) for a request in flight with the same ${route.header}, then get ` +
      `its answer, instead of 409 idempotency_key_in_use. ${without} An answer after such a ` +
      'wait carries Preference-Applied.',
    schema: { type: 'string', example: waitExample(route) },
  };
}

/** The `Preference-Applied` response header of a route that may wait, by name; none otherwise. */
export function preferenceAppliedHeader(
  route: ResolvedIdempotencyRouteOptions,
): Record<string, unknown> {
  if (route.wait.maxSeconds <= 0) return {};
  const description =
    'Present when the request asked to wait (Prefer: wait=N) and waited for a request in ' +
    `flight with the same key: wait= the seconds it was allowed (N, capped at ${route.wait.maxSeconds}).`;
  const schema = { type: 'string', pattern: '^wait=\\d+$', example: waitExample(route) };
  return { 'Preference-Applied': { description, schema } };
}

/** The headers a success response adds: `Idempotent-Replayed`, and `Preference-Applied`. */
export function successHeaders(route: ResolvedIdempotencyRouteOptions): Record<string, unknown> {
  return { [IDEMPOTENT_REPLAYED_HEADER]: REPLAYED_HEADER, ...preferenceAppliedHeader(route) };
}

/** `wait=10`, or the route's cap when it is lower. */
function waitExample(route: ResolvedIdempotencyRouteOptions): string {
  return `wait=${Math.min(10, Math.ceil(route.wait.maxSeconds))}`;
}

const REPLAYED_HEADER = {
  description:
    'Present (value true) when this is the stored response of an earlier request with the ' +
    'same key, replayed: same status, body and stored headers as the first answer.',
  schema: { type: 'string', enum: ['true'] },
};
