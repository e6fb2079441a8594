import { idempotentCall } from '../calls/idempotency-call-transport';
import { Idempotent } from '../module/idempotent.decorator';
import { graphqlCallTransport } from './graphql-call-transport';
import { splitMutationOptions } from './idempotent-mutation.options';
import type { IdempotentMutationOptions } from './idempotent-mutation.options';

/**
 * Makes a GraphQL mutation run once per key, however many times a client retries it.
 *
 * The key comes from the `Idempotency-Key` HTTP header of the GraphQL request (the route's
 * `header`), or from an argument of the mutation (`keyArg`). The first call claims the key in
 * the store and runs the resolver; its result is stored as JSON and a retry gets it back
 * without the resolver running, read back through the mutation's type (a `DateTime` field
 * replays as the date it was; return plain data: a class's getters and methods are not kept).
 * A retry while the first runs gets a GraphQL error with `extensions.code`
 * `idempotency_key_in_use`; the key sent with other arguments, or with
 * another mutation, `idempotency_key_reused`; no key, `idempotency_key_missing` (each with
 * `extensions.status`, and `extensions.retryAfterSeconds` where a retry should wait). A resolver
 * that throws gives the key back, so the retry runs it. With `transactional: true` the
 * resolver's writes (through `IdempotencyContext.entityManager`) commit with its record.
 *
 * Other options are those of `@Idempotent()` (`request`, `execution`, `responses`, ...). The
 * scope function gets the HTTP request, as on an HTTP route; the records are kept under
 * `mutation:<scope>`, apart from the HTTP routes' (no caller's scope can name them).
 *
 * @param options - where the key comes from, and route options
 * @throws IdempotencyConfigurationError when an option is invalid (at class definition)
 * @example
 * \@Mutation(() => Payment)
 * \@IdempotentMutation({ execution: { transactional: true } })
 * createPayment(@Args('input') input: CreatePaymentInput) { ... }
 */
export function IdempotentMutation(options: IdempotentMutationOptions = {}): MethodDecorator {
  const { keyArg, route } = splitMutationOptions(options);
  return idempotentCall(Idempotent(route), graphqlCallTransport(keyArg));
}
