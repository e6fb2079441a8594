import { UseFilters, UseGuards, UseInterceptors, applyDecorators } from '@nestjs/common';
import { isHandlerStartMarked, markingStart } from '../decorators/handler-start';
import { IdempotencyExceptionFilter } from '../errors/idempotency-exception.filter';
import { IDEMPOTENT_CLASS_METADATA, IDEMPOTENT_METADATA } from '../config/idempotency.constants';
import { validateRouteGroups } from '../config/idempotency.defaults';
import { IdempotencyGuard } from './idempotency.guard';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import type { IdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';

const bindLibrary = () =>
  applyDecorators(
    UseGuards(IdempotencyGuard),
    UseInterceptors(IdempotencyInterceptor),
    UseFilters(IdempotencyExceptionFilter),
  );

/**
 * Makes a route safe to retry: requires the `Idempotency-Key` header, runs the handler once per
 * (scope, key) and replays its stored response on every retry.
 *
 * On a controller class it covers the unsafe methods (POST, PUT, PATCH, DELETE) only, including
 * handlers inherited from base classes and mixins, and those of subclasses. Handler options are
 * merged over class options over module options, field by field.
 *
 * @param options - per-route overrides of the module's option groups
 * @throws IdempotencyConfigurationError when an option is invalid (at class definition)
 * @example
 * \@Post()
 * \@Idempotent({ execution: { transactional: true } })
 * create(@Body() dto: CreatePaymentDto) { ... }
 */
export function Idempotent(
  options: IdempotencyRouteOptions = {},
): ClassDecorator & MethodDecorator {
  const validated = validateRouteGroups(options);
  return (target: any, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (descriptor) {
      if (typeof descriptor.value === 'function' && !isHandlerStartMarked(descriptor.value)) {
        descriptor.value = markingStart(descriptor.value);
      }
      Reflect.defineMetadata(IDEMPOTENT_METADATA, validated, descriptor.value);
      bindLibrary()(target, propertyKey!, descriptor);
      return descriptor;
    }
    // Its routes' starts are marked at bootstrap, with those of subclasses it covers.
    Reflect.defineMetadata(IDEMPOTENT_CLASS_METADATA, validated, target);
    bindLibrary()(target);
    return target;
  };
}
