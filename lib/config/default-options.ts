import type {
  IdempotencyModuleOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';

/** 2xx, 3xx and 4xx but those a retry may change: 408, 409, 425 and 429. */
const DEFAULT_STORE_STATUSES = Array.from({ length: 300 }, (_, i) => 200 + i).filter(
  (status) => ![408, 409, 425, 429].includes(status),
);

/**
 * Scope of a request by default: the authenticated user's id when there is one. Returned as it
 * is, so a number is used as its string form and an id that is not a string or a number is
 * refused rather than every such user sharing the scope "[object Object]".
 */
function defaultScope(request: any): string | number | bigint | undefined {
  return request?.user?.id;
}

/** The groups of `forRoot()`'s options, each with every field: what the defaults hold of each. */
type OptionGroups = Required<
  Pick<IdempotencyModuleOptions, 'request' | 'execution' | 'wait' | 'responses' | 'errors'>
>;

/**
 * Every option of the module, grouped by concern, with its default: the shape of
 * `DEFAULT_IDEMPOTENCY_OPTIONS`.
 */
export type IdempotencyOptionDefaults = Readonly<
  Pick<
    ResolvedIdempotencyOptions,
    'store' | 'purge' | 'replayCache' | 'encryption' | 'metrics' | 'openApi'
  > & { [G in keyof OptionGroups]: Required<OptionGroups[G]> }
>;

/**
 * The one place every default lives, grouped as `forRoot()` takes the options. The docs' options
 * table is tested against it, and it says which group each option belongs to.
 */
export const DEFAULT_IDEMPOTENCY_OPTIONS: IdempotencyOptionDefaults = Object.freeze({
  request: {
    header: 'Idempotency-Key',
    required: true,
    scope: defaultScope,
    fingerprintHeaders: [],
    maxRequestBytes: 1_048_576,
  },
  execution: { lockTimeoutSeconds: 60, maxLockHoldSeconds: 3_600, transactional: false },
  wait: { maxSeconds: 0, defaultSeconds: 0, pollIntervalSeconds: 0.5, maxWaiters: 1_000 },
  responses: {
    ttlSeconds: 86_400,
    storeStatuses: DEFAULT_STORE_STATUSES,
    storeBody: true,
    replayHeaders: [
      'content-type',
      'location',
      'content-language',
      'content-location',
      'etag',
      'last-modified',
    ],
    maxResponseBytes: 1_048_576,
  },
  errors: {
    retryAfterSeconds: 1,
    problemTypeBaseUri: 'urn:nest-idempotency:problem:',
    errorBody: null,
  },
  store: 'typeorm',
  purge: {
    enabled: true,
    intervalSeconds: 60,
    batchSize: 1_000,
    abandonedRetentionSeconds: 2_592_000,
  },
  replayCache: { enabled: true, maxEntries: 10_000, maxBytes: 16 * 1024 * 1024 },
  encryption: null,
  metrics: true,
  openApi: true,
});
