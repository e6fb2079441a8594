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
