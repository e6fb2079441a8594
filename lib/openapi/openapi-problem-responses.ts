import { PROBLEM_CONTENT_TYPE } from '../config/idempotency.constants';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../config/idempotency.defaults';
import type { IdempotencyKeySource } from '../decorators/idempotency-key-source';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type {
  ResolvedIdempotencyOptions,
  ResolvedIdempotencyRouteOptions,
} from '../interfaces/idempotency-module-options.interface';
import { preferenceAppliedHeader } from './openapi-headers';
import { IDEMPOTENCY_PROBLEM_SCHEMA } from './openapi-problem-schema';

// The library's own answers on an idempotent route, as OpenAPI responses.

/**
 * The application's own declaration of a status the library also answers with: its description
 * followed by the library's, the library's headers added, and the problem+json content added
 * unless its body is declared by `type`, `schema` or an example (Swagger then builds the content
 * from those and would drop this).
 */
export function mergeResponse(
  existing: Record<string, any>,
  problem: ProblemResponse,
): Record<string, any> {
  const merged: Record<string, any> = {
    ...existing,
    description: [existing.description, problem.description].filter(Boolean).join('\n\n'),
    headers: { ...problem.headers, ...existing.headers },
  };
  const bodyDeclared = ['type', 'schema', 'example', 'examples'].some(
    (k) => existing[k] !== undefined,
  );
  if (problem.content && !bodyDeclared)
    merged.content = { ...problem.content, ...existing.content };
  return merged;
}

export interface ProblemResponse {
  description: string;
  headers: Record<string, unknown>;
  content?: Record<string, unknown>;
}

/**
 * Each status the library may answer a route with: its description and the problems it stands
 * for (their codes and examples; those with a `retryAfterSeconds` send `Retry-After`).
 */
function problemAnswers(
  route: ResolvedIdempotencyRouteOptions,
  source: IdempotencyKeySource,
): Record<string, [string, IdempotencyProblemException[]]> {
  const { retryAfterSeconds: retry, header: h } = route;
  // A scope the application set refuses a request it finds no caller for.
  const scoped = route.scope !== DEFAULT_IDEMPOTENCY_OPTIONS.request.scope;
  const answers: Record<string, [string, IdempotencyProblemException[]]> = {
    400: [
      `The ${h} header is ${route.required ? 'missing or ' : ''}malformed` +
        (scoped ? ', or the request does not identify its caller' : '') +
        '. Nothing was processed: fix the request.',
      [
        ...(route.required ? [IdempotencyProblemException.keyMissing(h)] : []),
        IdempotencyProblemException.keyInvalid(h, 'the key is longer than 255 characters'),
        ...(scoped ? [IdempotencyProblemException.scopeMissing()] : []),
      ],
    ],
    409: [
      `A request with this ${h} is still being processed (retry with the same key after ` +
        'Retry-After seconds' +
        (route.wait.maxSeconds > 0 ? '; Prefer: wait=N waits for it first' : '') +
        '), the operation it started was abandoned to an operator, or it completed and its ' +
        'response was not kept (do not retry).',
      [
        IdempotencyProblemException.keyInUse(h, retry),
        IdempotencyProblemException.operationAbandoned(),
        IdempotencyProblemException.responseNotStored(
          h,
          { status: 201, headers: {}, body: Buffer.alloc(0) },
          route.storeBody ? 'too_large' : 'not_kept',
        ),
      ],
    ],
    413: [
      `The request body is over ${route.maxRequestBytes} bytes, the most this route compares ` +
        'with a retry. Nothing was processed.',
      [IdempotencyProblemException.requestTooLarge(route.maxRequestBytes)],
    ],
    422: [
      `This ${h} was already used with a different request. Use a new key for a new request.`,
      [IdempotencyProblemException.keyReused(h)],
    ],
    503: [
      'The request could not be processed now (the idempotency store is unavailable, or an ' +
        'operation in phases will resume). Retry with the same key after Retry-After seconds.',
      [
        IdempotencyProblemException.storeUnavailable(retry),
        IdempotencyProblemException.retryLater(retry),
      ],
    ],
  };
  if (source.openApi) {
    const { description, problems } = source.openApi.badRequest;
    answers[400] = [description, problems];
  }
  if (source.fingerprint) {
    delete answers[413];
    delete answers[422];
  }
  return answers;
}

/**
 * The 400 / 409 / 413 / 422 / 503 answers of one route. A key source with its own documentation
 * gives the 400s; one that names a request by its key alone makes 413 and 422 impossible.
 */
export function problemResponses(
  route: ResolvedIdempotencyRouteOptions,
  module: ResolvedIdempotencyOptions,
  source: IdempotencyKeySource,
): Record<string, ProblemResponse> {
  const responses: Record<string, ProblemResponse> = {};
  for (const [status, [description, problems]] of Object.entries(problemAnswers(route, source))) {
    const codes = problems.map((p) => p.code).join(', ');
    const retrying = problems.filter((p) => p.retryAfterSeconds !== undefined).map((p) => p.code);
    const headers: Record<string, unknown> = {
      'Cache-Control': {
        description: 'Never cached.',
        schema: { type: 'string', enum: ['no-store'] },
      },
      ...(status === '409' ? preferenceAppliedHeader(route) : {}),
    };
    if (retrying.length > 0) {
      headers['Retry-After'] = {
        description: `Seconds to wait before retrying with the same key (sent with ${retrying.join(' and ')}).`,
        schema: { type: 'integer', minimum: 0, example: route.retryAfterSeconds },
      };
    }
    const response: ProblemResponse = { description: `${description} Codes: ${codes}.`, headers };
    if (module.errorBody === null) {
      const example = (p: IdempotencyProblemException) => {
        const value = p.toProblem(module.problemTypeBaseUri);
        return [p.code, { summary: value.title, value }];
      };
      response.content = {
        [PROBLEM_CONTENT_TYPE]: {
          schema: { $ref: `#/components/schemas/${IDEMPOTENCY_PROBLEM_SCHEMA}` },
          examples: Object.fromEntries(problems.map(example)),
        },
      };
    } else {
      response.description += ' The body is shaped by the errors.errorBody option.';
    }
    responses[status] = response;
  }
  return responses;
}
