/**
 * The route a request matched, as `METHOD /pattern` (e.g. `POST /payments/:id`): Express's
 * `req.route.path` (after `req.baseUrl`) or Fastify's `request.routeOptions.url`. Never the URL
 * itself, whose path parameters and query would make a label per request; `unknown` when the
 * adapter does not say.
 */
export function routeLabelOf(request: any): string {
  const pattern =
    request?.routeOptions?.url ??
    (typeof request?.route?.path === 'string'
      ? `${request.baseUrl ?? ''}${request.route.path}`
      : undefined);
  return `${String(request?.method ?? 'UNKNOWN').toUpperCase()} ${pattern ?? 'unknown'}`;
}
