import { Logger, RequestMethod } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import type * as Swagger from '@nestjs/swagger';
import { loadOptionalPeer } from '../utils/load-optional-peer';
import { markCoveredControllers } from '../decorators/handler-start';
import { idempotentRoutesOf } from '../decorators/idempotent-routes';
import type { IdempotentRouteDeclaration } from '../decorators/idempotent-routes';
import { mergeRouteOptions } from '../config/idempotency.defaults';
import { keySourceOf } from '../decorators/idempotency-key-source';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import { pluginResponseOf } from '../internals/swagger-plugin-response';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { requestParameters, successHeaders } from './openapi-headers';
import { mergeResponse, problemResponses } from './openapi-problem-responses';
import { problemModelOf } from './openapi-problem-schema';

export { IDEMPOTENCY_ERROR_CODES, IDEMPOTENCY_PROBLEM_SCHEMA } from './openapi-problem-schema';

type SwaggerApi = typeof Swagger;

type Handler = (...args: unknown[]) => unknown;

type NestModule = ModulesContainer extends Map<string, infer M> ? M : never;

type Controller = abstract new (...args: any[]) => unknown;

/** Injection token of the provider that documents the routes (its value is not used). */
export const IDEMPOTENCY_OPENAPI = Symbol('IDEMPOTENCY_OPENAPI');

/** Route methods the library claims (all but the safe ones; `@All()` also answers safe ones). */
const UNDOCUMENTED_METHODS = new Set<number>([
  RequestMethod.GET,
  RequestMethod.HEAD,
  RequestMethod.OPTIONS,
  RequestMethod.ALL,
]);

/** Nest's metadata key for `@HttpCode()` (`@nestjs/common/constants`, stable across 11/12). */
const HTTP_CODE_METADATA = '__httpCode__';

/** Each handler's own swagger metadata before the library documented it, one metadata key each. */
type Saved = [handler: Handler, key: string, value: unknown][];

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
 * When the application closes (the provider's `onModuleDestroy`), each handler gets back the
 * metadata it declared, so a later application in the same process (with other options, or
 * `openApi: false`) starts from it.
 *
 * @param options - this module instance's resolved options
 * @param modules - the application's modules
 */
export async function documentIdempotentRoutes(
  options: ResolvedIdempotencyOptions,
  modules: ModulesContainer,
): Promise<OnModuleDestroy> {
  const saved: Saved = [];
  const writes = { onModuleDestroy: () => restore(saved) };
  const controllers = controllersOf(options, modules);
  // The routes of covered classes get their own handlers first (as the module does anyway),
  // so documenting an inherited route never writes on the base class's function.
  markCoveredControllers(controllers);
  const covered = controllers.flatMap((controller) =>
    idempotentRoutesOf(controller)
      .filter((route) => !UNDOCUMENTED_METHODS.has(route.method))
      .map((route) => ({ ...route, controller })),
  );
  if (!options.openApi || covered.length === 0) return writes;
  // A missing @nestjs/swagger is silent (see `loadOptionalPeer`), a broken one is logged.
  const swagger = await loadOptionalPeer<SwaggerApi>('@nestjs/swagger').catch((error: unknown) => {
    const why = String((error as Error)?.message ?? error);
    new Logger('IdempotencyModule').warn(
      `@nestjs/swagger could not be loaded, so @Idempotent() routes are not documented: ${why}`,
    );
  });
  if (!swagger) return writes;
  for (const route of covered) {
    document(swagger, saved, route, options);
  }
  return writes;
}

/** A documented route: an idempotent one with an unsafe method, and its controller. */
interface Route extends IdempotentRouteDeclaration {
  controller: Controller;
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
): Controller[] {
  const all = [...modules.values()];
  const instances = all.filter((m) => m.providers.has(IDEMPOTENCY_OPTIONS));
  const own = instances.find((m) => m.providers.get(IDEMPOTENCY_OPTIONS)?.instance === options);
  const servedBy = (m: NestModule): NestModule | undefined =>
    instances.find(
      (i) =>
        !i.isGlobal &&
        [...m.imports].some(
          (x) => x === i || (x.exports.has(i.metatype) && [...x.imports].includes(i)),
        ),
    ) ?? instances.find((i) => i.isGlobal);
  return all
    .filter((m) => instances.length <= 1 || (own !== undefined && servedBy(m) === own))
    .flatMap((m) => [...m.controllers.values()].map((wrapper) => wrapper.metatype))
    .filter((c): c is Controller => typeof c === 'function');
}

/** Puts back each handler's own swagger metadata as the application declared it. */
function restore(saved: Saved): void {
  for (const [handler, key, value] of saved.splice(0)) {
    if (value === undefined) Reflect.deleteMetadata(key, handler);
    else Reflect.defineMetadata(key, value, handler);
  }
}

/** Writes one idempotent route's documentation on its handler, saving what it declared first. */
function document(
  swagger: SwaggerApi,
  saved: Saved,
  target: Route,
  module: ResolvedIdempotencyOptions,
): void {
  const { handler } = target;
  const route = mergeRouteOptions(module, target.onClass, target.onHandler);
  const { API_PARAMETERS, API_RESPONSE, API_EXTRA_MODELS } = swagger.DECORATORS;
  const own = (key: string) => Reflect.getOwnMetadata(key, handler);
  const keys = [API_PARAMETERS, API_RESPONSE, API_EXTRA_MODELS];
  saved.push(...keys.map((key): Saved[number] => [handler, key, own(key)]));
  const write = (key: string, value: unknown) => Reflect.defineMetadata(key, value, handler);

  const parameters: Record<string, any>[] = own(API_PARAMETERS) ?? [];
  // A header the application declared itself stays as it is.
  const declared = new Set(
    parameters.filter((p) => p.in === 'header').map((p) => String(p.name).toLowerCase()),
  );
  const source = keySourceOf(handler);
  const added = requestParameters(route, source).filter(
    (parameter) => !declared.has(String(parameter.name).toLowerCase()),
  );
  if (added.length > 0) write(API_PARAMETERS, [...parameters, ...added]);

  const responses: Record<string, Record<string, any>> = {
    ...(own(API_RESPONSE) ?? successOf(target)),
  };
  for (const [status, response] of Object.entries(responses)) {
    const headers = { ...successHeaders(route), ...response.headers };
    if (/^2\d\d$/.test(status)) responses[status] = { ...response, headers };
  }
  for (const [status, problem] of Object.entries(problemResponses(route, module, source))) {
    responses[status] = responses[status] ? mergeResponse(responses[status], problem) : problem;
  }
  write(API_RESPONSE, responses);

  const models: unknown[] = own(API_EXTRA_MODELS) ?? [];
  const model = problemModelOf(swagger);
  if (module.errorBody === null && !models.includes(model)) {
    write(API_EXTRA_MODELS, [...models, model]);
  }
}

/**
 * The response Swagger would have shown had the library not declared any: the `@HttpCode()`
 * status, or 201 for POST and 200 otherwise, with what the CLI plugin infers for it (Swagger
 * skips the plugin's declaration once a handler has responses).
 */
function successOf(route: Route): Record<string, Record<string, any>> {
  const status: number =
    Reflect.getMetadata(HTTP_CODE_METADATA, route.handler) ??
    (route.method === RequestMethod.POST ? 201 : 200);
  return { [status]: { description: '', ...pluginResponseOf(route.controller, route.name) } };
}
