import { UseFilters, UseGuards, UseInterceptors, applyDecorators } from '@nestjs/common';
import { isHandlerStartMarked, markingStart } from '../decorators/handler-start';
import { IdempotencyExceptionFilter } from '../errors/idempotency-exception.filter';
import { IDEMPOTENT_CLASS_METADATA, IDEMPOTENT_METADATA } from '../config/idempotency.constants';
import { validateRouteGroups } from '../config/idempotency.defaults';
import { IdempotencyGuard } from './idempotency.guard';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyClassGuard, IdempotencyClassInterceptor } from './idempotency-class-binding';
import type { IdempotencyRouteOptions } from '../interfaces/idempotency-module-options.interface';

/** Binds the library to one handler, in the handler's own order of guards and interceptors. */
const bindToHandler = applyDecorators(
  UseGuards(IdempotencyGuard),
  UseInterceptors(IdempotencyInterceptor),
  UseFilters(IdempotencyExceptionFilter),
);

/** Binds the library to a class's routes, except those whose handler binds it itself. */
const bindToClass = applyDecorators(
  UseGuards(IdempotencyClassGuard),
  UseInterceptors(IdempotencyClassInterceptor),
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
      bindToHandler(target, propertyKey!, descriptor);
      return descriptor;
    }
    // Once per class chain: Nest reads a class's guards and interceptors with its base classes',
    // so a subclass of a decorated base already has them; only its options are its own.
    const boundOnBase = Reflect.getMetadata(IDEMPOTENT_CLASS_METADATA, target) !== undefined;
    // Its routes' starts are marked at bootstrap, with those of subclasses it covers.
    Reflect.defineMetadata(IDEMPOTENT_CLASS_METADATA, validated, target);
    if (!boundOnBase) bindToClass(target);
    return target;
  };
}
