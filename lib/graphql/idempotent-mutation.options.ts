import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { refuseOptionsSet } from '../config/option-groups';
import type {
  IdempotencyRequestOptions,
  IdempotencyResponseOptions,
  IdempotencyRouteOptions,
} from '../interfaces/idempotency-module-options.interface';

/**
 * The options of `@Idempotent()` that apply to a GraphQL mutation: those about the HTTP
 * answer (its statuses and headers, waiting with `Prefer`, fingerprinted headers) do not.
 * @interface
 */
export type IdempotentMutationRouteOptions = Omit<
  IdempotencyRouteOptions,
  'wait' | 'request' | 'responses'
> & {
  /** The key's header (without `keyArg`), the caller, and the largest request compared. */
  request?: Partial<Omit<IdempotencyRequestOptions, 'fingerprintHeaders'>>;
  /** How long a result is kept, whether its body is, and the largest one stored. */
  responses?: Partial<Omit<IdempotencyResponseOptions, 'storeStatuses' | 'replayHeaders'>>;
};

/** What `@IdempotentMutation()` accepts. */
export interface IdempotentMutationOptions extends IdempotentMutationRouteOptions {
  /**
   * The name of the mutation's argument that carries the key (declare it with
   * `@Args('idempotencyKey')`): 1 to 255 printable ASCII characters, left out of what a retry
   * must match. Without it, the key is the `request.header` HTTP header of the GraphQL request.
   */
  keyArg?: string;
}

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
 * Checks the options of `@IdempotentMutation()` and splits them into the key's argument and
 * the route options `@Idempotent()` checks.
 * @param options - as given to the decorator
 * @throws IdempotencyConfigurationError for a `keyArg` that is not a GraphQL name, or an option
 *   that applies to HTTP routes only
 * @internal
 */
export function splitMutationOptions(options: IdempotentMutationOptions): {
  keyArg: string | undefined;
  route: IdempotencyRouteOptions;
} {
  const { keyArg, ...route } = options;
  if (keyArg !== undefined && (typeof keyArg !== 'string' || !GRAPHQL_NAME.test(keyArg))) {
    throw IdempotencyConfigurationError.invalidOption(
      'keyArg',
      keyArg,
      'Name an argument of the mutation, such as "idempotencyKey".',
    );
  }
  refuseOptionsSet(
    route,
    HTTP_ONLY,
    () =>
      '@IdempotentMutation() does not take it: it shapes HTTP answers, and a mutation ' +
      'answers inside a GraphQL response. Remove it.',
  );
  return { keyArg, route };
}
