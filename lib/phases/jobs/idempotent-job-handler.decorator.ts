import { Injectable, SetMetadata, applyDecorators } from '@nestjs/common';

/** Metadata key under which `@IdempotentJobHandler()` stores the job name. */
export const IDEMPOTENCY_JOB_HANDLER_METADATA = 'nest-idempotency:job-handler';

/**
 * Declares a provider class as the handler of staged jobs of one name (it implements
 * `IdempotencyJobHandlerInstance`). Found through Nest's discovery; list it in `providers`.
 *
 * @param name - the name local steps pass to `stage()`
 * @example
 * \@IdempotentJobHandler('send_receipt')
 * export class SendReceipt implements IdempotencyJobHandlerInstance<{ paymentId: string }> {
 *   async handle(job, manager) { await manager.insert(Receipt, { paymentId: job.args.paymentId, jobKey: job.key }); }
 * }
 */
export function IdempotentJobHandler(name: string): ClassDecorator {
  return applyDecorators(Injectable(), SetMetadata(IDEMPOTENCY_JOB_HANDLER_METADATA, name));
}
