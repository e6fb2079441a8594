import { Logger, RequestMethod } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import type * as Swagger from '@nestjs/swagger';
import { loadOptionalPeer } from '../utils/load-optional-peer';
import { markCoveredControllers } from '../decorators/handler-start';
import { isIdempotencySkipped } from '../decorators/skip-idempotency.decorator';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyErrorCode } from '../errors/idempotency-problem.exception';
import {
  IDEMPOTENT_CLASS_METADATA,
  IDEMPOTENT_METADATA,
  IDEMPOTENT_REPLAYED_HEADER,
  PROBLEM_CONTENT_TYPE,
} from '../config/idempotency.constants';
import { mergeRouteOptions } from '../config/idempotency.defaults';
import { keySourceOf } from '../decorators/idempotency-key-source';
import type { IdempotencyKeySource } from '../decorators/idempotency-key-source';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import type {
  ResolvedIdempotencyRouteOptions,
  IdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';

type SwaggerApi = typeof Swagger;
type Handler = (...args: unknown[]) => unknown;
type NestModule = ModulesContainer extends Map<string, infer M> ? M : never;

/** Injection token of the provider that documents the routes (its value is not used). */
export const IDEMPOTENCY_OPENAPI = Symbol('IDEMPOTENCY_OPENAPI');

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

/**
 * The key syntax of `parseIdempotencyKey`: 1–255 printable ASCII characters, either bare (no
 * comma, not starting with a quote or a space) or as an RFC 8941 string (`"…"`, where only `\"`
 * and `\\` are escapes).
 */
const KEY_PATTERN =
  '^(?:[\\x21\\x23-\\x2B\\x2D-\\x7E][\\x20-\\x2B\\x2D-\\x7E]{0,254}|"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\["\\\\]){1,255}")$';
const KEY_EXAMPLE = '8e03978e-40d5-43e8-bc93-6894a57f9324';

/** Route methods the library claims (all but the safe ones; `@All()` also answers safe ones). */
const UNDOCUMENTED_METHODS = new Set<number>([
  RequestMethod.GET,
  RequestMethod.HEAD,
  RequestMethod.OPTIONS,
  RequestMethod.ALL,
]);

/** Nest's metadata keys for a route handler (`@nestjs/common/constants`, stable across 11/12). */
const METHOD_METADATA = 'method';
const PATH_METADATA = 'path';
const HTTP_CODE_METADATA = '__httpCode__';
/** The static method the `@nestjs/swagger` CLI plugin adds to a controller. */
const PLUGIN_METADATA_FACTORY = '_OPENAPI_METADATA_FACTORY';

/**
 * Each handler's own swagger metadata (parameters, responses, extra models) as it was before the
 * library documented it, so a later bootstrap (another app in the same process, with other
 * options or `openApi: false`) starts again from what the application declared.
 */
const originals = new WeakMap<Handler, Map<string, unknown>>();

let swaggerPromise: Promise<SwaggerApi | undefined> | undefined;
let problemModel: { api: SwaggerApi; model: abstract new () => unknown } | undefined;

/**
 * `@nestjs/swagger`, when the application has it (an optional peer, see `loadOptionalPeer`).
 * Loaded once; a missing package is silent, a broken one is logged once.
 */
function loadSwagger(): Promise<SwaggerApi | undefined> {
  swaggerPromise ??= loadOptionalPeer<SwaggerApi>('@nestjs/swagger').catch((error: unknown) => {
    new Logger('IdempotencyModule').warn(
      `@nestjs/swagger could not be loaded, so @Idempotent() routes are not documented: ${String(
        (error as Error)?.message ?? error,
      )}`,
    );
    return undefined;
  });
  return swaggerPromise;
}

/**
 * Documents every `@Idempotent()` route of the application in its OpenAPI metadata, when
 * `@nestjs/swagger` is installed and `openApi` is on: the key header parameter, the
 * `Idempotent-Replayed` header of the success response, and the 400 / 409 / 422 / 503 answers
 * with the shared problem+json schema; on a route that may wait, the `Prefer` header parameter
 * and `Preference-Applied` on the success responses and the 409.
 *
 * Written at bootstrap, when Nest instantiates the module's providers (inside
 * `NestFactory.create()`, before `SwaggerModule.createDocument()` can run): only then are the
 * module options, the routes a class-level `@Idempotent()` covers (inherited ones included) and
 * the application's own `@ApiResponse()` / `@ApiHeader()` declarations all known. Nothing is
 * written at decoration. Without `@nestjs/swagger`, or with `openApi: false`, nothing is loaded.
 *
 * @param options - this module instance's resolved options
 * @param modules - the application's modules
 */
export async function documentIdempotentRoutes(
  options: ResolvedIdempotencyOptions,
  modules: ModulesContainer,
): Promise<true> {
  const controllers = controllersOf(options, modules);
  // The routes of covered classes get their own handlers first (as the module does anyway),
  // so documenting an inherited route never writes on the base class's function.
  markCoveredControllers(controllers);
  const routes = controllers.flatMap(routesOf);
  for (const route of routes) restore(route.handler);
  const covered = routes.filter((route) => route.options !== undefined);
  if (!options.openApi || covered.length === 0) return true;
  const swagger = await loadSwagger();
  if (!swagger) return true;
  const model = problemModelOf(swagger);
  for (const route of covered) {
    document(swagger, model, route, mergeRouteOptions(options, ...route.options!), options);
  }
  return true;
}

interface Route {
  controller: abstract new (...args: any[]) => unknown;
  name: string | symbol;
  handler: Handler;
  /** Class then handler options, when `@Idempotent()` covers the route. */
  options?: [IdempotencyRouteOptions | undefined, IdempotencyRouteOptions | undefined];
}

/** The route handlers a controller serves, its own and inherited ones, as Swagger sees them. */
function routesOf(controller: abstract new (...args: any[]) => unknown): Route[] {
  const routes: Route[] = [];
  const prototype = controller.prototype;
  const seen = new Set<string | symbol>(['constructor']);
  const onClass: IdempotencyRouteOptions | undefined = Reflect.getMetadata(
    IDEMPOTENT_CLASS_METADATA,
    controller,
  );
  for (let p = prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const name of Reflect.ownKeys(p)) {
      if (seen.has(name)) continue;
      seen.add(name);
      const handler = Object.getOwnPropertyDescriptor(p, name)?.value;
      if (typeof handler !== 'function') continue;
      if (Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
      const method: number | undefined = Reflect.getMetadata(METHOD_METADATA, handler);
      const onHandler: IdempotencyRouteOptions | undefined = Reflect.getMetadata(
        IDEMPOTENT_METADATA,
        handler,
      );
      const claimed =
        method !== undefined &&
        !UNDOCUMENTED_METHODS.has(method) &&
        (onHandler !== undefined || onClass !== undefined) &&
        !isIdempotencySkipped(handler);
      routes.push({
        controller,
        name,
        handler,
        options: claimed ? [onClass, onHandler] : undefined,
      });
    }
  }
  return routes;
}

/**
 * The controllers whose routes this module instance serves. With one instance (the usual case)
 * that is every controller; with several, a module's controllers go to the non-global instance
 * it imports (directly or through a module that re-exports it), else to the global one. Also
 * read by the shared-scope warning, so it warns about the routes this instance's options govern.
 */
export function controllersOf(
  options: ResolvedIdempotencyOptions,
  modules: ModulesContainer,
): (abstract new (...args: any[]) => unknown)[] {
  const all = [...modules.values()];
  const instances = all.filter((m) => m.providers.has(IDEMPOTENCY_OPTIONS));
  const own = instances.find((m) => m.providers.get(IDEMPOTENCY_OPTIONS)?.instance === options);
  const servedBy = (m: NestModule): NestModule | undefined => {
    const reached = instances.find(
      (i) =>
        !i.isGlobal &&
        [...m.imports].some(
          (x) => x === i || (x.exports.has(i.metatype) && [...x.imports].includes(i)),
        ),
    );
    return reached ?? instances.find((i) => i.isGlobal);
  };
  return all
    .filter((m) => instances.length <= 1 || (own !== undefined && servedBy(m) === own))
    .flatMap((m) => [...m.controllers.values()].map((wrapper) => wrapper.metatype))
    .filter((c): c is abstract new (...args: any[]) => unknown => typeof c === 'function');
}

/** Puts back a handler's own swagger metadata as the application declared it. */
function restore(handler: Handler): void {
  const saved = originals.get(handler);
  if (!saved) return;
  for (const [key, value] of saved) {
    if (value === undefined) Reflect.deleteMetadata(key, handler);
    else Reflect.defineMetadata(key, value, handler);
  }
  originals.delete(handler);
}

function save(handler: Handler, keys: string[]): void {
  originals.set(handler, new Map(keys.map((key) => [key, Reflect.getOwnMetadata(key, handler)])));
}

/** The problem+json schema as a model class, made once per loaded `@nestjs/swagger`. */
function problemModelOf(swagger: SwaggerApi): abstract new () => unknown {
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
    description: "The problem type: the module's problemTypeBaseUri followed by the code.",
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

/** Writes one idempotent route's documentation on its handler. */
function document(
  swagger: SwaggerApi,
  model: abstract new () => unknown,
  target: Route,
  route: ResolvedIdempotencyRouteOptions,
  module: ResolvedIdempotencyOptions,
): void {
  const { handler } = target;
  const { API_PARAMETERS, API_RESPONSE, API_EXTRA_MODELS } = swagger.DECORATORS;
  save(handler, [API_PARAMETERS, API_RESPONSE, API_EXTRA_MODELS]);

  const parameters: Record<string, any>[] = Reflect.getOwnMetadata(API_PARAMETERS, handler) ?? [];
  // The key header, or the headers of the route's own key source (a webhook's signature), and
  // Prefer on a route that may wait.
  const source = keySourceOf(handler);
  const waits = route.wait.maxSeconds > 0;
  const added = [
    ...(source.openApi?.parameters ?? [keyParameter(route)]),
    ...(waits ? [preferParameter(route)] : []),
  ].filter(
    (added) =>
      !parameters.some(
        (p) =>
          p.in === 'header' && String(p.name).toLowerCase() === String(added.name).toLowerCase(),
      ),
  );
  if (added.length > 0) Reflect.defineMetadata(API_PARAMETERS, [...parameters, ...added], handler);

  const declared: Record<string, Record<string, any>> | undefined = Reflect.getOwnMetadata(
    API_RESPONSE,
    handler,
  );
  const responses: Record<string, Record<string, any>> = { ...(declared ?? successOf(target)) };
  for (const [status, response] of Object.entries(responses)) {
    if (/^2\d\d$/.test(status)) {
      responses[status] = {
        ...response,
        headers: {
          [IDEMPOTENT_REPLAYED_HEADER]: REPLAYED_HEADER,
          ...(waits ? { [PREFERENCE_APPLIED_HEADER]: preferenceApplied(route) } : {}),
          ...response.headers,
        },
      };
    }
  }
  for (const [status, problem] of Object.entries(problemResponses(route, module, source))) {
    const existing = responses[status];
    responses[status] = existing ? mergeResponse(existing, problem) : problem;
  }
  Reflect.defineMetadata(API_RESPONSE, responses, handler);

  if (module.errorBody === null) {
    const models: unknown[] = Reflect.getOwnMetadata(API_EXTRA_MODELS, handler) ?? [];
    if (!models.includes(model)) {
      Reflect.defineMetadata(API_EXTRA_MODELS, [...models, model], handler);
    }
  }
}

/**
 * The application's own declaration of a status the library also answers with: its description
 * followed by the library's, the library's headers added, and the problem+json content added
 * unless its body is declared by `type`, `schema` or an example (Swagger then builds the content
 * from those and would drop this).
 */
function mergeResponse(
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

/** The key header parameter, in the shape `@ApiHeader()` gives it. */
function keyParameter(route: ResolvedIdempotencyRouteOptions): Record<string, unknown> {
  const use = route.required
    ? 'Required: a request without it is refused (400 idempotency_key_missing).'
    : 'Optional: a request without it runs without idempotency protection.';
  return {
    name: route.header,
    in: 'header',
    required: route.required,
    description:
      'A unique key per logical operation (a UUID v4 is a good choice), reused unchanged on ' +
      'every retry of that operation: the first request runs, a retry gets its stored response ' +
      '(with Idempotent-Replayed: true). 1 to 255 printable ASCII characters; a bare key may not ' +
      'contain a comma; an RFC 8941 string ("…", escapes \\" and \\\\) names the same key as its ' +
      `content. ${use}`,
    schema: { type: 'string', minLength: 1, pattern: KEY_PATTERN, example: KEY_EXAMPLE },
  };
}

/**
 * The `Prefer` request header of a route that may wait (RFC 7240 `wait`), in the shape
 * `@ApiHeader()` gives it. No `pattern`: the header may carry other preferences too.
 */
function preferParameter(route: ResolvedIdempotencyRouteOptions): Record<string, unknown> {
  const { maxSeconds, defaultSeconds } = route.wait;
  const without =
    defaultSeconds > 0
      ? `Without it, such a duplicate waits ${defaultSeconds} s; wait=0 asks not to wait.`
      : 'Without it, such a duplicate gets 409 at once.';
  return {
    name: 'Prefer',
    in: 'header',
    required: false,
    description:
      `Optional (RFC 7240): wait=N asks to wait up to N seconds (capped at ${maxSeconds}, the ` +
      `route's wait.maxSeconds) for a request in flight with the same ${route.header}, then get ` +
      `its answer, instead of 409 idempotency_key_in_use. ${without} An answer after such a ` +
      'wait carries Preference-Applied.',
    schema: { type: 'string', example: waitExample(route) },
  };
}

const PREFERENCE_APPLIED_HEADER = 'Preference-Applied';

/** The `Preference-Applied` response header of a route that may wait. */
function preferenceApplied(route: ResolvedIdempotencyRouteOptions): Record<string, unknown> {
  return {
    description:
      'Present when the request asked to wait (Prefer: wait=N) and waited for a request in ' +
      'flight with the same key: wait= the seconds it was allowed (N, capped at ' +
      `${route.wait.maxSeconds}).`,
    schema: { type: 'string', pattern: '^wait=\\d+$', example: waitExample(route) },
  };
}

/** `wait=10`, or the route's cap when it is lower. */
function waitExample(route: ResolvedIdempotencyRouteOptions): string {
  return `wait=${Math.min(10, Math.ceil(route.wait.maxSeconds))}`;
}

const REPLAYED_HEADER = {
  description:
    'Present (value true) when this is the stored response of an earlier request with the ' +
    'same key, replayed: same status, body and stored headers as the first answer.',
  schema: { type: 'string', enum: ['true'] },
};

/**
 * The response Swagger would have shown had the library not declared any: the `@HttpCode()`
 * status, or 201 for POST and 200 otherwise, with what the CLI plugin infers for it (Swagger
 * skips the plugin's declaration once a handler has responses).
 */
function successOf(route: Route): Record<string, Record<string, any>> {
  const method = Reflect.getMetadata(METHOD_METADATA, route.handler);
  const status: number =
    Reflect.getMetadata(HTTP_CODE_METADATA, route.handler) ??
    (method === RequestMethod.POST ? 201 : 200);
  return { [status]: { description: '', ...pluginResponseOf(route) } };
}

/** What the `@nestjs/swagger` CLI plugin says of a route's response, if it ran. */
function pluginResponseOf(route: Route): Record<string, unknown> {
  if (typeof route.name !== 'string') return {};
  for (
    let p = route.controller.prototype;
    p && p !== Object.prototype;
    p = Object.getPrototypeOf(p)
  ) {
    const owner = p.constructor;
    if (!owner || !Object.prototype.hasOwnProperty.call(owner, PLUGIN_METADATA_FACTORY)) continue;
    const found = owner[PLUGIN_METADATA_FACTORY]()?.[route.name];
    if (!found) continue;
    // What applies to the operation rather than to its response, as Swagger leaves it out.
    const operationOnly = new Set(['summary', 'deprecated', 'tags', 'status']);
    return Object.fromEntries(Object.entries(found).filter(([key]) => !operationOnly.has(key)));
  }
  return {};
}

interface ProblemResponse {
  description: string;
  headers: Record<string, unknown>;
  content?: Record<string, unknown>;
}

/**
 * The 400 / 409 / 413 / 422 / 503 answers of one route. A key source with its own documentation
 * gives the 400s; one that names a request by its key alone makes 413 and 422 impossible.
 */
function problemResponses(
  route: ResolvedIdempotencyRouteOptions,
  module: ResolvedIdempotencyOptions,
  source: IdempotencyKeySource,
): Record<string, ProblemResponse> {
  const retry = route.retryAfterSeconds;
  const h = route.header;
  const answers: Record<string, [string, IdempotencyProblemException[], boolean]> = {
    400: [
      `The ${h} header is ${route.required ? 'missing or ' : ''}malformed. Nothing was processed: ` +
        'fix the request.',
      [
        ...(route.required ? [IdempotencyProblemException.keyMissing(h)] : []),
        IdempotencyProblemException.keyInvalid(h, 'the key is longer than 255 characters'),
      ],
      false,
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
      true,
    ],
    413: [
      `The request body is over ${route.maxRequestBytes} bytes, the most this route compares ` +
        'with a retry. Nothing was processed.',
      [IdempotencyProblemException.requestTooLarge(route.maxRequestBytes)],
      false,
    ],
    422: [
      `This ${h} was already used with a different request. Use a new key for a new request.`,
      [IdempotencyProblemException.keyReused(h)],
      false,
    ],
    503: [
      'The request could not be processed now (the idempotency store is unavailable, or an ' +
        'operation in phases will resume). Retry with the same key after Retry-After seconds.',
      [
        IdempotencyProblemException.storeUnavailable(retry),
        IdempotencyProblemException.retryLater(retry),
      ],
      true,
    ],
  };
  if (source.openApi) {
    const { description, problems } = source.openApi.badRequest;
    answers[400] = [description, problems, false];
  }
  if (source.fingerprint) {
    delete answers[413];
    delete answers[422];
  }
  const responses: Record<string, ProblemResponse> = {};
  for (const [status, [description, problems, retries]] of Object.entries(answers)) {
    const codes = problems.map((p) => p.code).join(', ');
    const headers: Record<string, unknown> = {
      'Cache-Control': {
        description: 'Never cached.',
        schema: { type: 'string', enum: ['no-store'] },
      },
    };
    if (status === '409' && route.wait.maxSeconds > 0) {
      headers[PREFERENCE_APPLIED_HEADER] = preferenceApplied(route);
    }
    if (retries) {
      headers['Retry-After'] = {
        description: `Seconds to wait before retrying with the same key (sent with ${problems
          .filter((p) => p.retryAfterSeconds !== undefined)
          .map((p) => p.code)
          .join(' and ')}).`,
        schema: { type: 'integer', minimum: 0, example: retry },
      };
    }
    const response: ProblemResponse = { description: `${description} Codes: ${codes}.`, headers };
    if (module.errorBody === null) {
      response.content = {
        [PROBLEM_CONTENT_TYPE]: {
          schema: { $ref: `#/components/schemas/${IDEMPOTENCY_PROBLEM_SCHEMA}` },
          examples: Object.fromEntries(
            problems.map((p) => [
              p.code,
              {
                summary: p.toProblem(module.problemTypeBaseUri).title,
                value: p.toProblem(module.problemTypeBaseUri),
              },
            ]),
          ),
        },
      };
    } else {
      response.description += ' The body is shaped by the errorBody option.';
    }
    responses[status] = response;
  }
  return responses;
}
