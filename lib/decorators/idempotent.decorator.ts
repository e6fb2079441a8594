import { UseFilters, UseGuards, UseInterceptors, applyDecorators } from '@nestjs/common';
import { idempotencyRequestStorage } from '../context/idempotency-request-state';
import { IdempotencyExceptionFilter } from '../errors/idempotency-exception.filter';
import { IDEMPOTENT_CLASS_METADATA, IDEMPOTENT_METADATA } from '../idempotency.constants';
import { validateRouteOptions } from '../idempotency.defaults';
import { IdempotencyGuard } from '../idempotency.guard';
import { IdempotencyInterceptor } from '../idempotency.interceptor';
import type { IdempotentOptions } from '../interfaces/idempotency-module-options.interface';

const MARKED = Symbol('nest-idempotency:marks-handler-start');

/**
 * Wraps a handler so the library knows when its body starts: a request rejected before that
 * (by a pipe) is not stored and its key stays usable. Metadata set on the original function by
 * other decorators is carried over.
 */
function markHandlerStart(descriptor: PropertyDescriptor): void {
  const original = descriptor.value;
  if (typeof original !== 'function' || original[MARKED]) return;
  const wrapped = function (this: unknown, ...args: unknown[]) {
    const state = idempotencyRequestStorage.getStore();
    if (state) state.handlerStarted = true;
    return original.apply(this, args);
  };
  Object.defineProperty(wrapped, 'name', { value: original.name });
  for (const key of Reflect.getOwnMetadataKeys(original)) {
    Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapped);
  }
  (wrapped as any)[MARKED] = true;
  descriptor.value = wrapped;
}

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
 * On a controller class it covers the unsafe methods (POST, PUT, PATCH, DELETE) only. Handler
 * options are merged over class options over module options, field by field.
 *
 * @param options - per-route overrides of the module options, plus `transactional`
 * @throws IdempotencyConfigurationError when an option is invalid (at class definition)
 * @example
 * \@Post()
 * \@Idempotent({ transactional: true })
 * create(@Body() dto: CreatePaymentDto) { ... }
 */
export function Idempotent(options: IdempotentOptions = {}): ClassDecorator & MethodDecorator {
  const validated = validateRouteOptions(options);
  return (target: any, propertyKey?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (descriptor) {
      markHandlerStart(descriptor);
      Reflect.defineMetadata(IDEMPOTENT_METADATA, validated, descriptor.value);
      bindLibrary()(target, propertyKey!, descriptor);
      return descriptor;
    }
    Reflect.defineMetadata(IDEMPOTENT_CLASS_METADATA, validated, target);
    const prototype = target.prototype;
    for (const name of Object.getOwnPropertyNames(prototype)) {
      if (name === 'constructor') continue;
      const method = Object.getOwnPropertyDescriptor(prototype, name);
      if (!method || typeof method.value !== 'function') continue;
      markHandlerStart(method);
      Object.defineProperty(prototype, name, method);
    }
    bindLibrary()(target);
    return target;
  };
}
