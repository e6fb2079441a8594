import { Injectable } from '@nestjs/common';
import type { CallHandler, ExecutionContext } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { IDEMPOTENT_METADATA } from '../config/idempotency.constants';
import { IdempotencyGuard } from './idempotency.guard';
import { IdempotencyInterceptor } from './idempotency.interceptor';

/**
 * Whether the handler carries its own `@Idempotent()`, whose method-level binding then serves
 * it: that binding runs in the handler's own order, after an interceptor listed before it (a
 * `FileInterceptor` that parses the body the fingerprint reads).
 */
const boundOnHandler = (context: ExecutionContext): boolean =>
  Reflect.getMetadata(IDEMPOTENT_METADATA, context.getHandler()) !== undefined;

/** The guard a class-level `@Idempotent()` binds: it leaves a handler with its own to that one. */
@Injectable()
export class IdempotencyClassGuard extends IdempotencyGuard {
  /** @inheritDoc */
  override canActivate(context: ExecutionContext): boolean {
    return boundOnHandler(context) || super.canActivate(context);
  }
}

/**
 * The interceptor a class-level `@Idempotent()` binds: it leaves a handler with its own
 * `@Idempotent()` to that handler's binding, so each call is run once.
 */
@Injectable()
export class IdempotencyClassInterceptor extends IdempotencyInterceptor {
  /** @inheritDoc */
  override intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return boundOnHandler(context) ? next.handle() : super.intercept(context, next);
  }
}
