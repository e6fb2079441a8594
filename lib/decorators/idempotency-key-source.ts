import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyKeyPlace } from '../errors/idempotency-problem.types';
import type { ResolvedIdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';
import { readIdempotencyKey } from '../utils/parse-idempotency-key';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';
import type { IdempotencyNamespace } from '../utils/request-scope';

/**
 * Where the key of a route's requests comes from: the port through which a part of the library
 * gives a route a key other than the key header. The interceptor asks it once, after every
 * guard and before pipes (a missing or invalid key is refused there). Every route
 * has the key header's source unless a decorator set another on its handler
 * (`@IdempotentWebhook()` derives the event id from what the delivery's signature covers, once
 * its own guard verified it). The rest of the run (claim, lease, replay, release) is the same
 * whatever the source.
 * @internal
 */
export interface IdempotencyKeySource {
  /**
   * Reads the key of one request, after the route's guards ran.
   * @param request - the adapter's request
   * @param route - the route's options
   */
  read(request: any, route: ResolvedIdempotencyRouteOptions): ParsedIdempotencyKey;
  /**
   * The fingerprint of a request under its key, for a source whose key names the request by
   * itself: a webhook's event id names the event, whatever bytes a redelivery carries (Stripe's
   * `pending_webhooks` changes from one attempt to the next), so a redelivery is a replay, never
   * a 422. Without it, the request is fingerprinted (method, path, body, `fingerprintHeaders`).
   * @param request - the adapter's request
   * @param scope - the request's scope
   */
  fingerprint?(request: any, scope: string): string;
  /**
   * The namespace of the route's records, apart from every caller's scope (`normaliseScope`):
   * `webhook` for a webhook route. Without it, the records are the HTTP routes'.
   */
  readonly namespace?: IdempotencyNamespace;
  /** Where refusals say the key is, in place of the key header (a webhook's event id). */
  readonly keyPlace?: IdempotencyKeyPlace;
  /** How the OpenAPI document shows the route's key, in place of the key header's. */
  readonly openApi?: {
    /** The request headers it reads, as `@ApiHeader()` gives them. */
    parameters: Record<string, unknown>[];
    /** Its 400 answers: what they mean, and one example of each. */
    badRequest: { description: string; problems: IdempotencyProblemException[] };
  };
}

/** Metadata key of a handler's key source. */
const KEY_SOURCE_METADATA = 'nest-idempotency:key-source';

/** The default: the route's key header (`header`), bare or as an RFC 8941 string. */
const HEADER_KEY_SOURCE: IdempotencyKeySource = {
  read: (request, route) => readIdempotencyKey(request, route.header),
};

const sources = new WeakMap<object, IdempotencyKeySource>();

/**
 * Gives a handler its key source. Called by a decorator, on the function Nest will route to.
 * @param handler - the route handler (`descriptor.value` once every wrapper is applied)
 * @param source - where its key comes from
 */
export function setKeySource(handler: object, source: IdempotencyKeySource): void {
  Reflect.defineMetadata(KEY_SOURCE_METADATA, source, handler);
}

/**
 * The key source of a route: the one a decorator set on its handler, else the key header.
 * @param handler - `ExecutionContext.getHandler()`
 */
export function keySourceOf(handler: unknown): IdempotencyKeySource {
  if (typeof handler !== 'function') return HEADER_KEY_SOURCE;
  let source = sources.get(handler);
  if (!source) {
    source = Reflect.getMetadata(KEY_SOURCE_METADATA, handler) ?? HEADER_KEY_SOURCE;
    sources.set(handler, source!);
  }
  return source!;
}
