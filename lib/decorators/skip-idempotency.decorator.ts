/** Metadata key under which `@SkipIdempotency()` marks a handler. */
const SKIP_IDEMPOTENCY_METADATA = 'nest-idempotency:skip';

/**
 * Leaves one route of a controller under a class-level `@Idempotent()` unprotected, as
 * `@SkipThrottle()` does for the throttler: the key is not required, nothing is claimed,
 * fingerprinted or stored, the handler runs on every request, and the route is not documented as
 * idempotent in the OpenAPI document. It wins over `@Idempotent()` on the same method.
 *
 * @example
 * \@Controller('payments')
 * \@Idempotent()
 * class PaymentsController {
 *   \@Post('quotes')
 *   \@SkipIdempotency() // a quote changes nothing: safe to run on every retry
 *   quote(@Body() dto: QuoteDto) { ... }
 * }
 */
export function SkipIdempotency(): MethodDecorator {
  return (_target, _propertyKey, descriptor) => {
    Reflect.defineMetadata(SKIP_IDEMPOTENCY_METADATA, true, descriptor.value as object);
    return descriptor;
  };
}

/**
 * Whether `@SkipIdempotency()` marks this handler (on the handler or on the method it was
 * copied from, whose metadata the copy carries).
 * @param handler - a route handler, `ExecutionContext.getHandler()`
 */
export function isIdempotencySkipped(handler: unknown): boolean {
  return (
    typeof handler === 'function' &&
    Reflect.getMetadata(SKIP_IDEMPOTENCY_METADATA, handler) === true
  );
}
