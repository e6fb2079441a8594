import type * as Swagger from '@nestjs/swagger';
import { PROBLEMS, type IdempotencyErrorCode } from '../errors/idempotency-error-codes';

// The shared problem+json schema that the documented 4xx and 5xx answers refer to.

type SwaggerApi = typeof Swagger;

/** Name of the shared problem+json schema in `components.schemas`. */
export const IDEMPOTENCY_PROBLEM_SCHEMA = 'IdempotencyProblem';

/** Every stable error code, for the schema's enum: the keys of `PROBLEMS`, in its order. */
export const IDEMPOTENCY_ERROR_CODES = Object.keys(PROBLEMS) as IdempotencyErrorCode[];

/** The problem+json members, as `@ApiProperty()` takes them (each required unless it says). */
const MEMBERS: Record<string, Record<string, unknown>> = {
  type: {
    type: String,
    format: 'uri',
    description: "The problem type: the module's errors.problemTypeBaseUri followed by the code.",
  },
  title: { type: String, description: 'A short summary of the problem type.' },
  status: { type: 'integer', description: 'The HTTP status code.' },
  detail: { type: String, description: 'What happened and what to do; never contains the key.' },
  code: {
    type: String,
    enum: IDEMPOTENCY_ERROR_CODES,
    description: 'The stable error code clients branch on.',
  },
  completedStatus: {
    type: 'integer',
    required: false,
    description:
      'With idempotency_response_not_stored: the status the request completed with, whose ' +
      'body was not kept.',
  },
};

let problemModel: { api: SwaggerApi; model: abstract new () => unknown } | undefined;

/** The problem+json schema as a model class, made once per loaded `@nestjs/swagger`. */
export function problemModelOf(swagger: SwaggerApi): abstract new () => unknown {
  if (problemModel?.api === swagger) return problemModel.model;
  // The class name is the schema's name in components.schemas.
  const model = { [IDEMPOTENCY_PROBLEM_SCHEMA]: class {} }[IDEMPOTENCY_PROBLEM_SCHEMA];
  for (const [name, spec] of Object.entries(MEMBERS)) {
    const options = { required: true, ...spec } as Swagger.ApiPropertyOptions;
    swagger.ApiProperty(options)(model.prototype, name);
  }
  problemModel = { api: swagger, model };
  return model;
}
