import { Inject, Injectable } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import {
  IDEMPOTENT_CLASS_METADATA,
  IDEMPOTENT_METADATA,
  SAFE_METHODS,
} from '../config/idempotency.constants';
import { mergeRouteOptions } from '../config/idempotency.defaults';
import { isIdempotencySkipped } from './skip-idempotency.decorator';
import type {
  ResolvedIdempotencyRouteOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';

/**
 * Works out the options in force for a route: handler options over class options over module
 * options. A class-level `@Idempotent()` covers unsafe methods only; safe methods (GET, HEAD,
 * OPTIONS) are never covered, nor is a handler marked `@SkipIdempotency()`. Results are cached
 * per handler.
 */
@Injectable()
export class IdempotencyRouteOptionsResolver {
  private readonly cache = new WeakMap<object, ResolvedIdempotencyRouteOptions | null>();

  constructor(@Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions) {}

  /**
   * @param context - the execution context of an HTTP request, or of another kind of call
   * @param method - the request method (for another kind of call, its context type)
   * @returns the route's options, or `undefined` when the request is not covered
   */
  resolve(context: ExecutionContext, method: string): ResolvedIdempotencyRouteOptions | undefined {
    // A call that is not an HTTP request (a message, a mutation) has no safe method.
    if (context.getType() === 'http' && SAFE_METHODS.has(method.toUpperCase())) return undefined;
    const handler = context.getHandler();
    let resolved = this.cache.get(handler);
    if (resolved === undefined) {
      // The options `@Idempotent()` set on the handler, and on the class (own or inherited).
      const onHandler = Reflect.getMetadata(IDEMPOTENT_METADATA, handler);
      const onClass = Reflect.getMetadata(IDEMPOTENT_CLASS_METADATA, context.getClass());
      const covered = (onHandler || onClass) && !isIdempotencySkipped(handler);
      resolved = covered ? mergeRouteOptions(this.options, onClass, onHandler) : null;
      this.cache.set(handler, resolved);
    }
    return resolved ?? undefined;
  }
}
