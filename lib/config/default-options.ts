import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';

const DEFAULT_STORE_STATUSES: number[] = [];
for (let status = 200; status < 500; status++) {
  if (![408, 409, 425, 429].includes(status)) DEFAULT_STORE_STATUSES.push(status);
}

/**
 * Scope of a request by default: the authenticated user's id when there is one. Returned as it
 * is, so a number is used as its string form and an id that is not a string or a number is
 * refused rather than every such user sharing the scope "[object Object]".
 */
function defaultScope(request: any): string | number | bigint | undefined {
  return request?.user?.id;
}

/**
 * The one place every default lives. The README's options table is tested against it.
 */
export const DEFAULT_IDEMPOTENCY_OPTIONS: Readonly<ResolvedIdempotencyOptions> = Object.freeze({
  header: 'Idempotency-Key',
  required: true,
  ttlSeconds: 86_400,
  lockTimeoutSeconds: 60,
  maxLockHoldSeconds: 3_600,
  scope: defaultScope,
  fingerprintHeaders: [],
  storeStatuses: DEFAULT_STORE_STATUSES,
  replayHeaders: [
    'content-type',
    'location',
    'content-language',
    'content-location',
    'etag',
    'last-modified',
  ],
  retryAfterSeconds: 1,
  transactional: false,
  wait: { maxSeconds: 0, defaultSeconds: 0, pollIntervalSeconds: 0.5 },
  maxRequestBytes: 1_048_576,
  maxResponseBytes: 1_048_576,
  storeBody: true,
  purge: {
    enabled: true,
    intervalSeconds: 60,
    batchSize: 1_000,
    abandonedRetentionSeconds: 2_592_000,
  },
  replayCache: { enabled: true, maxEntries: 10_000, maxBytes: 16 * 1024 * 1024 },
  maxWaiters: 1_000,
  store: 'typeorm',
  problemTypeBaseUri: 'urn:nest-idempotency:problem:',
  errorBody: null,
  metrics: true,
  openApi: true,
  encryption: null,
});
