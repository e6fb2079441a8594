import { Injectable } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { IdempotencyProblemException } from './errors/idempotency-problem.exception';
import { IdempotencyEvents } from './events/idempotency.events';
import { IdempotencyRouteOptionsResolver } from './idempotency-route-options.resolver';
import type { IdempotencyRouteOptions } from './interfaces/idempotency-module-options.interface';
import { headerLines, parseIdempotencyKey } from './utils/parse-idempotency-key';
import type { ParsedIdempotencyKey } from './utils/parse-idempotency-key';

/** Where the guard leaves the parsed key for the interceptor. */
export const PARSED_KEY = Symbol('nest-idempotency:parsed-key');

/**
 * Enforces the key header on decorated routes (SPEC §3). Runs before pipes, so a request with
 * no key, or a malformed one, never reaches validation or the handler: 400 problem+json.
 * Subclass it and override `readKey()` to take the key from elsewhere.
 */
@Injectable()
export class IdempotencyGuard implements CanActivate {
  constructor(
    protected readonly routes: IdempotencyRouteOptionsResolver,
    protected readonly events: IdempotencyEvents,
  ) {}

  /** @inheritDoc */
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest();
    const route = this.routes.resolve(context, request.method);
    if (!route) return true;
    const parsed = this.readKey(request, route);
    request[PARSED_KEY] = parsed;
    if (parsed.kind === 'missing' && route.required) {
      this.reject(
        new IdempotencyProblemException(
          'idempotency_key_missing',
          `This request needs an ${route.header} header: send a unique value (a UUID is a good choice) and reuse it when you retry.`,
        ),
      );
    }
    if (parsed.kind === 'invalid') {
      this.reject(
        new IdempotencyProblemException(
          'idempotency_key_invalid',
          `The ${route.header} header is invalid: ${parsed.reason}. Send 1 to 255 printable ASCII characters, bare or as a quoted string.`,
        ),
      );
    }
    return true;
  }

  /**
   * Reads and parses the key of one request, one value per header line.
   * @param request - Express or Fastify request
   * @param route - options in force for the route
   */
  protected readKey(request: any, route: IdempotencyRouteOptions): ParsedIdempotencyKey {
    const rawHeaders: string[] | undefined = request.rawHeaders ?? request.raw?.rawHeaders;
    return parseIdempotencyKey(headerLines(rawHeaders, route.header));
  }

  private reject(error: IdempotencyProblemException): never {
    this.events.emit({ type: 'rejected', code: error.code, status: error.getStatus() });
    throw error;
  }
}
