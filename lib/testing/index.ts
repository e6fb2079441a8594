/**
 * `nest-idempotency/testing`: the store conformance suite, for a store of your own. It loads no
 * NestJS, TypeORM or test runner: the runner's `describe`, `it` and `expect` are passed in.
 *
 * @module nest-idempotency/testing
 */
export { describeIdempotencyStoreConformance } from './idempotency-store-conformance';
export type {
  IdempotencyStoreTestFunctions,
  IdempotencyStoreUnderTest,
} from './idempotency-store-conformance';
