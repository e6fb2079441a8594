import type { Logger } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import type { IdempotencyProblemException } from './idempotency-problem.exception';

/**
 * The response of one of the library's errors, shaped by the application's `errorBody` when it
 * has one. A renderer that throws (or returns something that is not a body) is logged and the
 * problem+json answer goes out instead: a broken renderer never turns a 409 into a 500.
 */
export function renderProblem(
  exception: IdempotencyProblemException,
  options: Pick<ResolvedIdempotencyOptions, 'problemTypeBaseUri' | 'errorBody'>,
  logger: Logger,
): StoredResponse {
  try {
    return exception.toResponse(options.problemTypeBaseUri, options.errorBody);
  } catch (error) {
    logger.error(
      `errorBody() failed on ${exception.code}; answered with problem+json instead`,
      error as Error,
    );
    return exception.toResponse(options.problemTypeBaseUri);
  }
}
