/**
 * `nest-idempotency/graphql`: GraphQL mutations run once per key. `@IdempotentMutation()` reads
 * the key from the `Idempotency-Key` HTTP header or an argument, runs the resolver once and
 * returns its stored result to every retry; refusals are GraphQL errors with a stable
 * `extensions.code`. Needs `@nestjs/graphql` and `graphql`.
 *
 * @module nest-idempotency/graphql
 */
export { IdempotentMutation } from './idempotent-mutation.decorator';
export type {
  IdempotentMutationOptions,
  IdempotentMutationRouteOptions,
} from './idempotent-mutation.options';
