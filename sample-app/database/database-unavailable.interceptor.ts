import { HttpException, HttpStatus, Injectable } from '@nestjs/common';
import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import { catchError, throwError } from 'rxjs';
import type { Observable } from 'rxjs';
import { isDatabaseUnavailable } from '../../lib/storage/typeorm';

/** Seconds a client is asked to wait before retrying while the database is unreachable. */
const RETRY_AFTER_SECONDS = 1;

/**
 * Answers 503 with `Retry-After` (code `database_unavailable`) when a handler fails because the
 * database could not be reached, instead of Nest's generic 500. The idempotency layer does not
 * store a 503, and a transactional handler's writes were rolled back, so the client's retry with
 * the same key runs the request again once the database is back.
 */
@Injectable()
export class DatabaseUnavailableInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      catchError((error: unknown) => {
        if (!isDatabaseUnavailable(error)) return throwError(() => error);
        const response = context
          .switchToHttp()
          .getResponse<{ header(n: string, v: string): unknown }>();
        response.header('Retry-After', String(RETRY_AFTER_SECONDS));
        return throwError(
          () =>
            new HttpException(
              {
                error: {
                  type: 'api_error',
                  code: 'database_unavailable',
                  message: 'The database is unreachable. Retry with the same Idempotency-Key.',
                },
              },
              HttpStatus.SERVICE_UNAVAILABLE,
            ),
        );
      }),
    );
  }
}
