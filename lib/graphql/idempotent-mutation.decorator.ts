import { idempotentCall } from '../calls/idempotency-call-transport';
import { Idempotent } from '../module/idempotent.decorator';
import { check, refuseOptionsSet } from '../config/option-groups';
import { graphqlCallTransport } from './graphql-call-transport';
import type { IdempotentMutationOptions } from './idempotent-mutation.options';

/** A GraphQL name: what an argument may be called. */
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/** Options that `@IdempotentMutation()` refuses: they shape an HTTP answer a mutation does not have. */
const HTTP_ONLY = [
  'wait',
  'request.fingerprintHeaders',
  'responses.storeStatuses',
  'responses.replayHeaders',
];

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
 * @throws IdempotencyConfigurationError when an option is invalid (at class definition): a
 *   `keyArg` that is not a GraphQL name, or an option that applies to HTTP routes only
 * @example
 * \@Mutation(() => Payment)
 * \@IdempotentMutation({ execution: { transactional: true } })
 * createPayment(@Args('input') input: CreatePaymentInput) { ... }
 */
export function IdempotentMutation(options: IdempotentMutationOptions = {}): MethodDecorator {
  // The key's argument, and the route options `@Idempotent()` checks.
  const { keyArg, ...route } = options;
  const named = keyArg === undefined || (typeof keyArg === 'string' && GRAPHQL_NAME.test(keyArg));
  check(named, 'keyArg', keyArg, 'Name an argument of the mutation, such as "idempotencyKey".');
  refuseOptionsSet(
    route,
    HTTP_ONLY,
    () =>
      '@IdempotentMutation() does not take it: it shapes HTTP answers, and a mutation ' +
      'answers inside a GraphQL response. Remove it.',
  );
  return idempotentCall(Idempotent(route), graphqlCallTransport(keyArg));
}
