/**
 * `nest-idempotency/client`: a `fetch` wrapper that retries the way an idempotent API expects.
 * Imports nothing from NestJS, TypeORM or pg; runs in Node 20+ and browsers.
 *
 * @module nest-idempotency/client
 */
export { createIdempotentClient } from './idempotent-client';
export type { IdempotentClient } from './idempotent-client';
export { DEFAULT_IDEMPOTENT_CLIENT_OPTIONS } from './idempotent-client.options';
export type { IdempotentClientOptions, IdempotentRetry } from './idempotent-client.options';
export type { IdempotentRequest, IdempotentResponse } from './idempotent-request';
export { IdempotentRequestError } from './idempotent-request.error';
export { isRetryableAnswer, parseRetryAfter } from './retry-policy';
