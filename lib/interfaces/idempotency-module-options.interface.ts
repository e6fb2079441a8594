import type { Type } from '@nestjs/common';
import type { IdempotencyErrorBodyRenderer } from '../errors/idempotency-problem.types';
import type { IdempotencyStore } from '../storage/idempotency.store';
import type {
  IdempotencyEncryptionOptions,
  ResolvedIdempotencyEncryption,
} from '../config/encryption-options';
import type { IdempotencyStoreFactory } from '../storage/idempotency-store.factory';

/**
 * Works out the caller identity (the scope) of a request. Keys are unique per scope, so one
 * caller can never see another caller's stored response.
 *
 * A number (or bigint) is accepted as its string form, so a numeric user id `42` and the string
 * `'42'` are the same scope. A scope longer than 256 bytes of UTF-8 (or one that starts with
 * `sha256:`, contains a NUL character or an unpaired surrogate) is stored as `sha256:` followed by
 * the hex SHA-256 of it, so any length is safe. Anything else (an object, an array, a boolean,
 * NaN) fails the request with an `IdempotencyConfigurationError` that says how to fix the resolver.
 *
 * @param request - the adapter's request object (Express `Request` or Fastify `FastifyRequest`)
 * @returns the scope; `undefined`, `null` or `''` all mean "no scope"
 * @example
 * ```ts
 * scope: (req) => req.user?.accountId // a string, or a number such as 42
 * ```
 */
export type IdempotencyScopeResolver = (
  request: any,
) => string | number | bigint | undefined | null;

/** Settings of the scheduled TTL purge. */
export interface IdempotencyPurgeOptions {
  /**
   * Whether the module runs the purge on a schedule. `purgeExpired()` stays callable either way.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.purge.enabled` (true)
   */
  enabled: boolean;
  /**
   * Seconds between two purge runs. Accepted: 0.1 to 2147483 (the longest `setInterval` period).
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.purge.intervalSeconds` (60)
   */
  intervalSeconds: number;
  /**
   * Rows deleted per statement; a run repeats batches until nothing expired is left. Accepted:
   * whole numbers from 1 to 100000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.purge.batchSize` (1000)
   */
  batchSize: number;
  /**
   * How long the purge keeps an abandoned operation in phases after it was last changed, for an
   * operator (`IdempotencyOperations.listAbandoned()`). Accepted: 1 to 315360000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.purge.abandonedRetentionSeconds` (2592000, 30 days)
   */
  abandonedRetentionSeconds: number;
}

/** Settings of the in-process cache of completed records that serves replays. */
export interface IdempotencyReplayCacheOptions {
  /**
   * Whether replays of records this instance completed or replayed are served from memory.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.enabled` (true)
   */
  enabled: boolean;
  /**
   * Completed records kept at most; least recently used go first. Accepted: whole numbers from 1
   * to 10000000.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxEntries` (10000)
   */
  maxEntries: number;
  /**
   * Bytes kept at most (bodies, headers and about 1 KB of bookkeeping per entry). Accepted:
   * whole numbers from 1 to 4294967296 (4 GiB).
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.replayCache.maxBytes` (16 MiB)
   */
  maxBytes: number;
}

/**
 * How a duplicate that finds the key in flight waits for the first request (`Prefer: wait=N`,
 * RFC 7240) and then gets its answer, instead of 409 at once. Not exported: the API reference
 * shows its fields where it is used.
 * @inline
 */
export interface IdempotencyWaitOptions {
  /**
   * The longest a duplicate may wait, whatever its `Prefer: wait=N` asks; `0` turns waiting
   * off (409 at once). Accepted: 0 to 300.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.wait.maxSeconds` (0)
   */
  maxSeconds: number;
  /**
   * How long a duplicate without a `Prefer: wait` waits; capped by `maxSeconds`. Accepted: 0 to
   * 300.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.wait.defaultSeconds` (0)
   */
  defaultSeconds: number;
  /**
   * How often the waiters of one key look again while the store cannot tell them the key
   * settled on another instance (behind PgBouncer's transaction pooling, a store without
   * wake-ups, or while the listening connection is down). Accepted: 0.05 to 60.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.wait.pollIntervalSeconds` (0.5)
   */
  pollIntervalSeconds: number;
}

/**
 * Options that may be set per route with `@Idempotent()` as well as for the whole module.
 * Handler options are merged over class options over module options, field by field.
 * Users see its fields through `IdempotencyRouteOptions` and `IdempotencyModuleOptions`.
 * @internal
 */
export interface ResolvedIdempotencyRouteOptions {
  /**
   * Request header that carries the key.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.request.header` (`Idempotency-Key`)
   */
  header: string;
  /**
   * Whether a decorated route without a key is rejected with 400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.request.required` (true)
   */
  required: boolean;
  /**
   * How long a completed response is replayed, in seconds. Accepted: 0.1 to 315360000 (10 years).
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.responses.ttlSeconds` (86400)
   */
  ttlSeconds: number;
  /**
   * Lease of an in-flight request, in seconds. Renewed while the handler runs; the expiry is
   * written on the record (database clock), so every instance agrees when it lapsed.
   * Accepted: 0.1 to 86400. The lease is renewed every third of it, so values under 1 s are for
   * tests.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.execution.lockTimeoutSeconds` (60)
   */
  lockTimeoutSeconds: number;
  /**
   * Stop renewing the lease of a hung handler after this many seconds. Accepted: 0.1 to
   * 31536000 (1 year).
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.execution.maxLockHoldSeconds` (3600)
   */
  maxLockHoldSeconds: number;
  /**
   * Caller identity; keys are unique per scope. Numbers are accepted as their string form and
   * scopes longer than 256 bytes are hashed (see {@link IdempotencyScopeResolver}).
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.request.scope` (`req.user?.id`, else `''`)
   */
  scope: IdempotencyScopeResolver;
  /**
   * Request headers (case-insensitive) that also go into the fingerprint.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.request.fingerprintHeaders` (`[]`)
   */
  fingerprintHeaders: string[];
  /**
   * Handler outcomes that are final: stored and replayed. Others release the key.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.responses.storeStatuses` (2xx, 3xx, 4xx but 408,
   * 409, 425, 429)
   */
  storeStatuses: number[];
  /**
   * Response headers stored and replayed (case-insensitive).
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.responses.replayHeaders`
   */
  replayHeaders: string[];
  /**
   * `Retry-After` seconds sent with 409 and 503. Accepted: whole numbers from 0 to 86400.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.errors.retryAfterSeconds` (1)
   */
  retryAfterSeconds: number;
  /**
   * Run the handler inside one PostgreSQL transaction that also completes the record.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.execution.transactional` (false)
   */
  transactional: boolean;
  /**
   * Let a duplicate that finds the key in flight wait for the first request's answer
   * (`Prefer: wait=N`); off by default (409 at once). Merged field by field.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.wait` (`maxSeconds: 0`: off)
   */
  wait: IdempotencyWaitOptions;
  /**
   * The largest request body, in bytes, the route fingerprints. A larger one is refused with
   * 413 `idempotency_request_too_large` before the key is claimed.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.request.maxRequestBytes` (1 MiB)
   */
  maxRequestBytes: number;
  /**
   * The largest response body, in bytes, that is stored. A final response over it completes the
   * record without its body: the handler never runs again for the key, and a retry gets 409
   * `idempotency_response_not_stored`.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.responses.maxResponseBytes` (1 MiB)
   */
  maxResponseBytes: number;
  /**
   * Whether the response body is stored. `false` for routes that mint secrets (API keys,
   * tokens, one-time links): the record keeps the status and the `replayHeaders` only, and a
   * retry gets 409 `idempotency_response_not_stored` with them.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.responses.storeBody` (`true`)
   */
  storeBody: boolean;
}

/**
 * Every option of the module, after defaults are merged in. Users see its fields through
 * `IdempotencyModuleOptions` and `DEFAULT_IDEMPOTENCY_OPTIONS`.
 * @internal
 */
export interface ResolvedIdempotencyOptions extends ResolvedIdempotencyRouteOptions {
  /**
   * TTL purge schedule.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.purge` (every 60 s, batches of 1000)
   */
  purge: IdempotencyPurgeOptions;
  /**
   * In-process cache of completed records for replays.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.replayCache` (on, 10000 entries, 16 MiB)
   */
  replayCache: IdempotencyReplayCacheOptions;
  /**
   * Requests that may wait for a key in flight (`wait`) at once on this instance; past it, a
   * duplicate gets 409 at once, so guessed keys cannot pin the server. Accepted: whole numbers
   * from 1 to 1000000. Module-level only.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.wait.maxWaiters` (1000)
   */
  maxWaiters: number;
  /**
   * Which store backs the module: `'typeorm'` (PostgreSQL through the app's default DataSource,
   * with the defaults of `typeOrmStore()`), `typeOrmStore({ ... })` from `nest-idempotency/typeorm`
   * (another DataSource, table, timeout, or no prepared statements), `'memory'` (unit tests only;
   * refused when `NODE_ENV=production`), your own class, or any `IdempotencyStoreFactory`.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.store` (`'typeorm'`)
   */
  store: 'typeorm' | 'memory' | Type<IdempotencyStore> | IdempotencyStoreFactory;
  /**
   * Base URI of the `type` member of problem+json errors; the error code is appended.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.errors.problemTypeBaseUri`
   */
  problemTypeBaseUri: string;
  /**
   * Shapes the body (and content type) of the library's errors for an API with its own error
   * format; `null` sends RFC 9457 problem+json. Status, `Retry-After` and
   * `Cache-Control: no-store` are kept; keep `problem.code` in the body. Module-level only.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.errors.errorBody` (`null`: problem+json)
   * @example
   * errorBody: (problem) => ({ body: { error: { type: 'idempotency_error', code: problem.code, message: problem.detail } } })
   */
  errorBody: IdempotencyErrorBodyRenderer | null;
  /**
   * Record OpenTelemetry metrics through `@opentelemetry/api` when the application has it (see
   * the README's "Health and metrics"); `false` turns them off. Module-level only.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.metrics` (`true`)
   */
  metrics: boolean;
  /**
   * Document `@Idempotent()` routes in the OpenAPI document when the application has
   * `@nestjs/swagger` (the key header, `Idempotent-Replayed`, the 400 / 409 / 422 / 503 answers;
   * see the README's "OpenAPI"); `false` leaves the routes as the application declared them.
   * Module-level only.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.openApi` (`true`)
   */
  openApi: boolean;
  /**
   * Encryption at rest: stored responses (headers, body and status) and the
   * input and state of operations in phases are sealed with AES-256-GCM. The first key seals,
   * every key opens, so keys rotate without downtime; a record whose key is gone answers 500
   * `idempotency_record_unreadable` and is never run again, as does one in the clear once
   * `plaintextUntil` has passed. `null` stores them in the clear. Module-level only.
   * @defaultValue `DEFAULT_IDEMPOTENCY_OPTIONS.encryption` (`null`: not encrypted)
   * @example
   * encryption: { keys: [{ id: '2026-01', secret: process.env.IDEMPOTENCY_KEY! }] } // openssl rand -base64 32
   */
  encryption: ResolvedIdempotencyEncryption | null;
}

/** Which requests are the same: the key's header, the caller, and what a retry must match. @inline */
export type IdempotencyRequestOptions = Pick<
  ResolvedIdempotencyRouteOptions,
  'header' | 'required' | 'scope' | 'fingerprintHeaders' | 'maxRequestBytes'
>;

/** How the handler runs: its lease, and whether it shares the record's transaction. @inline */
export type IdempotencyExecutionOptions = Pick<
  ResolvedIdempotencyRouteOptions,
  'lockTimeoutSeconds' | 'maxLockHoldSeconds' | 'transactional'
>;

/** Which answers are kept, what of them, and for how long they are replayed. @inline */
export type IdempotencyResponseOptions = Pick<
  ResolvedIdempotencyRouteOptions,
  'ttlSeconds' | 'storeStatuses' | 'storeBody' | 'replayHeaders' | 'maxResponseBytes'
>;

/** How the library's own refusals look. @inline */
export type IdempotencyErrorOptions = Pick<
  ResolvedIdempotencyOptions,
  'retryAfterSeconds' | 'problemTypeBaseUri' | 'errorBody'
>;

/** Waiting for the first request, with how many may wait at once on this instance. @inline */
export type IdempotencyModuleWaitOptions = IdempotencyWaitOptions &
  Pick<ResolvedIdempotencyOptions, 'maxWaiters'>;

/**
 * What `IdempotencyModule.forRoot()` accepts: any subset of the options, each group merged over
 * its defaults field by field.
 */
export interface IdempotencyModuleOptions
  extends
    Omit<IdempotencyRouteOptions, 'wait' | 'errors'>,
    Partial<Pick<ResolvedIdempotencyOptions, 'store' | 'metrics' | 'openApi'>> {
  /** Waiting for the first request, merged over the defaults. */
  wait?: Partial<IdempotencyModuleWaitOptions>;
  /** How the library's refusals look. */
  errors?: Partial<IdempotencyErrorOptions>;
  /** TTL purge schedule, merged over the defaults; `false` disables the schedule. */
  purge?: Partial<IdempotencyPurgeOptions> | false;
  /** Replay cache, merged over the defaults; `false` turns it off. */
  replayCache?: Partial<IdempotencyReplayCacheOptions> | false;
  /**
   * Encryption at rest of stored responses and operation input and state, with the keys given
   * (the first seals, all open); `null` (the default) stores them in the clear. Module-level only.
   */
  encryption?: IdempotencyEncryptionOptions | null;
}

/**
 * A class that supplies the module options to `IdempotencyModule.forRootAsync({ useClass })` (or
 * `useExisting`). Nest instantiates it with its own dependencies (list them in `imports`, or in
 * `extraProviders`) and calls `createIdempotencyOptions()` once, at bootstrap.
 *
 * @example
 * \@Injectable()
 * export class IdempotencyConfig implements IdempotencyOptionsFactory {
 *   constructor(private readonly config: ConfigService) {}
 *
 *   createIdempotencyOptions(): IdempotencyModuleOptions {
 *     const ttlSeconds = Number(this.config.getOrThrow('IDEMPOTENCY_TTL_SECONDS'));
 *     return { responses: { ttlSeconds } };
 *   }
 * }
 *
 * IdempotencyModule.forRootAsync({ imports: [ConfigModule], useClass: IdempotencyConfig })
 */
export interface IdempotencyOptionsFactory {
  /**
   * @returns the module options (any subset; the rest come from `DEFAULT_IDEMPOTENCY_OPTIONS`),
   *   or a promise of them
   */
  createIdempotencyOptions(): IdempotencyModuleOptions | Promise<IdempotencyModuleOptions>;
}

/**
 * What `@Idempotent()` accepts: the groups of the module's options that make sense per route,
 * each merged field by field over the class's and the module's.
 */
export interface IdempotencyRouteOptions {
  /** Which requests are the same: the key's header, the caller, what a retry must match. */
  request?: Partial<IdempotencyRequestOptions>;
  /** How the handler runs: its lease, and whether it shares the record's transaction. */
  execution?: Partial<IdempotencyExecutionOptions>;
  /** Waiting for the first request (`maxWaiters` is module-level only). */
  wait?: Partial<IdempotencyWaitOptions>;
  /** Which answers are kept, what of them, and for how long. */
  responses?: Partial<IdempotencyResponseOptions>;
  /** The `Retry-After` of this route's refusals (the error format is module-level only). */
  errors?: Partial<Pick<IdempotencyErrorOptions, 'retryAfterSeconds'>>;
}

/**
 * Route options as the decorators store them: the groups flattened into the fields the library
 * reads.
 * @internal
 */
export type FlatIdempotencyRouteOptions = Partial<Omit<ResolvedIdempotencyRouteOptions, 'wait'>> & {
  wait?: Partial<IdempotencyWaitOptions>;
};
