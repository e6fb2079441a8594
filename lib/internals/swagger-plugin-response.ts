import { fellBack, internalEnabled } from './internal-switch';

/** The trick's name, for `NEST_IDEMPOTENCY_PLAIN`. */
export const SWAGGER_PLUGIN_RESPONSE = 'swagger-plugin-response';

/**
 * The static method the `@nestjs/swagger` CLI plugin (or `SwaggerModule.loadPluginMetadata()`)
 * puts on a controller; swagger keeps its name in a file its package does not export.
 */
const FACTORY = '_OPENAPI_METADATA_FACTORY';

/** What the plugin says of the operation rather than of its response, which Swagger leaves out. */
const OPERATION_ONLY = new Set(['summary', 'deprecated', 'tags', 'status']);

type Factory = () => Record<string, Record<string, unknown> | undefined> | undefined;

/**
 * What the `@nestjs/swagger` CLI plugin says of a route's response (its type), when it ran.
 * Swagger applies the plugin's response only to a handler that declares none, and the library
 * declares the 4xx answers of every idempotent route: without this, such a route's success
 * response would lose the type the plugin inferred. There is no public way to ask swagger for
 * it, so the plugin's factory is read directly; where it is not a function (a changed plugin),
 * or `NEST_IDEMPOTENCY_PLAIN` names `swagger-plugin-response`, the success response is
 * documented as swagger documents a route without the plugin (its status, no type), and the
 * change is reported once.
 * @param controller - the route's controller (its base classes are searched too)
 * @param name - the handler's name
 */
export function pluginResponseOf(
  controller: abstract new (...args: any[]) => unknown,
  name: string | symbol,
): Record<string, unknown> {
  if (typeof name !== 'string' || !internalEnabled(SWAGGER_PLUGIN_RESPONSE)) return {};
  for (let p = controller.prototype; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    const owner = p.constructor as Record<string, unknown> | undefined;
    if (!owner || !Object.prototype.hasOwnProperty.call(owner, FACTORY)) continue;
    const factory = owner[FACTORY];
    if (typeof factory !== 'function') {
      fellBack(SWAGGER_PLUGIN_RESPONSE, `${FACTORY} on ${String(owner.name)} is not a function`);
      return {};
    }
    const found = (factory as Factory).call(owner)?.[name];
    if (!found) continue;
    return Object.fromEntries(Object.entries(found).filter(([key]) => !OPERATION_ONLY.has(key)));
  }
  return {};
}
