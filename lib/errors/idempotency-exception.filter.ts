import { Catch, Inject, Injectable, Logger } from '@nestjs/common';
import type { ArgumentsHost, ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import { IdempotencyProblemException } from './idempotency-problem.exception';
import { renderProblem } from './render-problem';

/**
 * Renders `IdempotencyProblemException` as `application/problem+json` (RFC 9457), or in the
 * application's shape when it set `errorBody`, with `Cache-Control: no-store`, through the HTTP
 * adapter so Express and Fastify answer alike. Bound to every `@Idempotent()` route; other
 * exceptions go to the application's filters.
 */
@Catch(IdempotencyProblemException)
@Injectable()
export class IdempotencyExceptionFilter implements ExceptionFilter<IdempotencyProblemException> {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /** @inheritDoc */
  catch(exception: IdempotencyProblemException, host: ArgumentsHost): void {
    const adapter = this.adapterHost.httpAdapter;
    const response = host.switchToHttp().getResponse();
    if (adapter.isHeadersSent(response)) {
      adapter.end(response);
      return;
    }
    const problem = renderProblem(exception, this.options, this.logger);
    for (const [name, value] of Object.entries(problem.headers)) {
      adapter.setHeader(response, name, value as string);
    }
    adapter.reply(response, problem.body.toString('utf8'), problem.status);
  }
}
