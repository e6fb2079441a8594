import type * as Swagger from '@nestjs/swagger';
import type { IdempotencyErrorCode } from '../errors/idempotency-error-codes';

// The shared problem+json schema that the documented 4xx and 5xx answers refer to.

type SwaggerApi = typeof Swagger;

/** Name of the shared problem+json schema in `components.schemas`. */
export const IDEMPOTENCY_PROBLEM_SCHEMA = 'IdempotencyProblem';

/**
 * Every stable error code, for the schema's enum. A `Record` over the union, so the compiler
 * refuses this list when a code is added to or removed from `IdempotencyErrorCode`.
 */
const CODES: Record<IdempotencyErrorCode, true> = {
  idempotency_key_missing: true,
  idempotency_key_invalid: true,
  idempotency_key_reused: true,
  idempotency_key_in_use: true,
  idempotency_store_unavailable: true,
  idempotency_body_unreadable: true,
  idempotency_scope_invalid: true,
  idempotency_scope_missing: true,
  idempotency_transaction_unavailable: true,
  idempotency_retry_later: true,
  idempotency_operation_abandoned: true,
  idempotency_operation_unavailable: true,
  idempotency_operation_input_invalid: true,
  idempotency_record_unreadable: true,
  idempotency_request_too_large: true,
  idempotency_response_not_stored: true,
  idempotency_webhook_signature_invalid: true,
};

export const IDEMPOTENCY_ERROR_CODES = Object.keys(CODES) as IdempotencyErrorCode[];

let problemModel: { api: SwaggerApi; model: abstract new () => unknown } | undefined;

/** The problem+json schema as a model class, made once per loaded `@nestjs/swagger`. */
export function problemModelOf(swagger: SwaggerApi): abstract new () => unknown {
  if (problemModel?.api === swagger) return problemModel.model;
  // The class name is the schema's name in components.schemas.
  const model = { [IDEMPOTENCY_PROBLEM_SCHEMA]: class {} }[IDEMPOTENCY_PROBLEM_SCHEMA];
  const property = (name: string, spec: Record<string, unknown>) =>
    swagger.ApiProperty({ required: true, ...spec } as Swagger.ApiPropertyOptions)(
      model.prototype,
      name,
    );
  property('type', {
    type: String,
    format: 'uri',
    description: "The problem type: the module's errors.problemTypeBaseUri followed by the code.",
  });
  property('title', { type: String, description: 'A short summary of the problem type.' });
  property('status', { type: 'integer', description: 'The HTTP status code.' });
  property('detail', {
    type: String,
    description: 'What happened and what to do; never contains the key.',
  });
  property('code', {
    type: String,
    enum: IDEMPOTENCY_ERROR_CODES,
    description: 'The stable error code clients branch on.',
  });
  property('completedStatus', {
    type: 'integer',
    required: false,
    description:
      'With idempotency_response_not_stored: the status the request completed with, whose ' +
      'body was not kept.',
  });
  problemModel = { api: swagger, model };
  return model;
}
