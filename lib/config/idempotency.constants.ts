/** Metadata key under which `@Idempotent()` stores its route options. */
export const IDEMPOTENT_METADATA = 'nest-idempotency:route-options';

/** Metadata key marking options that came from a controller-level `@Idempotent()`. */
export const IDEMPOTENT_CLASS_METADATA = 'nest-idempotency:class-options';

/**
 * The scope of an application that means one key space for every caller, said explicitly:
 * `scope: () => SHARED_SCOPE`. A `scope` resolver that returns no scope (`undefined`, `null` or
 * `''`) for a request has the request refused (400 `idempotency_scope_missing`).
 */
export const SHARED_SCOPE = 'shared';

/** Response header added to every replayed response (value `true`). */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';

/** HTTP methods that are never claimed or stored, even when they carry a key. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Media type of every error the library produces (RFC 9457). */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * Prefix of the header names the library keeps on a stored record for itself (why a body was
 * not kept, how it was sealed); never sent to a client, refused in `replayHeaders`.
 */
export const RESERVED_HEADER_PREFIX = 'x-nest-idempotency-';

/**
 * The stored-header entry of a record completed without its body, and why: `too_large` (over
 * `maxResponseBytes`) or `not_kept` (a route with `storeBody: false`).
 */
export const BODY_OMITTED_HEADER = `${RESERVED_HEADER_PREFIX}body-omitted`;

/** Headers that can never be stored and replayed, whatever `replayHeaders` says. */
export const FORBIDDEN_REPLAY_HEADERS: ReadonlySet<string> = new Set([
  'set-cookie',
  'date',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  IDEMPOTENT_REPLAYED_HEADER.toLowerCase(),
]);
