/**
 * `nest-idempotency/terminus`: the `@nestjs/terminus` health indicator. A subpath of its own
 * because it imports `@nestjs/terminus` (an optional peer): the package root never loads it.
 *
 * @module nest-idempotency/terminus
 */
export {
  DEFAULT_IDEMPOTENCY_HEALTH_OPTIONS,
  IdempotencyHealthIndicator,
} from './idempotency-health.indicator';
export type { IdempotencyHealthOptions } from './idempotency-health.indicator';
export type { IdempotencyTableHealth } from '../storage/idempotency-store.capabilities';
