/**
 * `nest-idempotency/cli`: the operator tool, run from the application's own script with its
 * module (inspect a key, list records in flight, stuck and abandoned, release a stuck key,
 * resolve an abandoned operation, purge now). A subpath of its own: the package root never
 * loads it.
 *
 * @module nest-idempotency/cli
 */
export { runIdempotencyCli } from './idempotency-cli';
export type { IdempotencyCliOptions } from './idempotency-cli';
export type {
  IdempotencyOperatorListKind,
  IdempotencyOperatorRecord,
  IdempotencyOperatorReleaseResult,
  IdempotencyStoreOperator,
} from '../storage/idempotency-store.capabilities';
