import type * as Swagger from '@nestjs/swagger';
import { PROBLEMS, type IdempotencyErrorCode } from '../errors/idempotency-error-codes';

// The shared problem+json schema that the documented 4xx and 5xx answers refer to.

type SwaggerApi = typeof Swagger;

/** Name of the shared problem+json schema in `components.schemas`. */
export const IDEMPOTENCY_PROBLEM_SCHEMA = 'IdempotencyProblem';

/** Every stable error code, for the schema's enum: the keys of `PROBLEMS`, in its order. */
export const IDEMPOTENCY_ERROR_CODES = Object.keys(PROBLEMS) as IdempotencyErrorCode[];

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
