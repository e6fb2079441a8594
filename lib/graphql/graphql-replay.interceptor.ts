import { Injectable } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { GraphQLResolveInfo } from 'graphql';
import { map } from 'rxjs';
import type { Observable } from 'rxjs';
import { reviveResult, wasReplayed } from './replayed-result';

/**
 * Bound by `@IdempotentMutation()` around the library's interceptor: a result answered from
 * its record (JSON) is read back through the mutation's return type, so a `DateTime` field
 * replays as it answered the first time. A first run's result passes as the resolver gave it.
 * @internal
 */
@Injectable()
export class IdempotencyGraphqlReplayInterceptor implements NestInterceptor {
  /** @inheritDoc */
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const info = context.getArgByIndex<GraphQLResolveInfo | undefined>(3);
    return next
      .handle()
      .pipe(
        map((value) => (info && wasReplayed(info) ? reviveResult(value, info.returnType) : value)),
      );
  }
}
