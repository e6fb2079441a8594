import { Injectable, SetMetadata, applyDecorators } from '@nestjs/common';

/** Metadata key under which `@IdempotentOperation()` stores the operation's name. */
export const IDEMPOTENT_OPERATION_METADATA = 'nest-idempotency:operation';

/**
 * Declares a provider class as a named operation in phases (it implements
 * `IdempotencyOperation`). The module finds it through Nest's discovery, so the completer can
 * resume an operation without its HTTP request. List the class in a module's `providers`.
 *
 * @param name - unique in the application, stored on each record; renaming it strands records
 *   in flight under the old name
 * @example
 * \@IdempotentOperation('payments.create')
 * export class CreatePayment { readonly steps = defineSteps<CreatePaymentDto, PaymentState, PaymentOutput>((step) => [...]); }
 */
export function IdempotentOperation(name: string): ClassDecorator {
  return applyDecorators(Injectable(), SetMetadata(IDEMPOTENT_OPERATION_METADATA, name));
}
