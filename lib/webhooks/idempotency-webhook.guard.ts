import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { IdempotencyEvents } from '../events/idempotency.events';
import { emitRejected } from '../execution/rejected-event';
import { routeLabelOf } from '../utils/route-label';
import { IDEMPOTENCY_WEBHOOK_CLOCK } from './idempotent-webhook.options';
import type { IdempotencyWebhookClock } from './idempotent-webhook.options';
import { deliveryPartsOf, signedBodyOf, webhookEventIdOf } from './webhook-key-source';
import { keysOf, WEBHOOK_ROUTE_METADATA } from './webhook-route';
import type { ResolvedWebhookRoute } from './webhook-route';
import { verifyWebhookSignature } from './webhook-signatures';

/**
 * Verifies the signature of a webhook delivery over its raw body, before any other part of the
 * library (or a pipe, or the handler) sees it, then checks that what the signature covers has
 * an event id (the route's key, which its key source derives from the request again: nothing is
 * attached to the request). Bound by `@IdempotentWebhook()`, ahead of the idempotency guard; a
 * delivery that does not verify is refused with 400 `idempotency_webhook_signature_invalid`, and
 * nothing runs or is stored.
 */
@Injectable()
export class IdempotencyWebhookGuard implements CanActivate {
  private readonly logger = new Logger('Idempotency');
  /** Routes already told about a missing raw body (once each). */
  private readonly warned = new Set<string>();

  /** Built by Nest's injector, in the module of the webhook's controller. @internal */
  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly events: IdempotencyEvents,
    @Optional()
    @Inject(IDEMPOTENCY_WEBHOOK_CLOCK)
    private readonly clock?: IdempotencyWebhookClock,
  ) {}

  /** @inheritDoc */
  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return true;
    const route: ResolvedWebhookRoute | undefined = Reflect.getMetadata(
      WEBHOOK_ROUTE_METADATA,
      context.getHandler(),
    );
    if (!route) return true;
    const request = context.switchToHttp().getRequest();
    const rawBody = this.rawBodyOf(request);
    const verdict = verifyWebhookSignature(
      route.signature,
      deliveryPartsOf(request, rawBody),
      await this.keysOf(route),
      (this.clock ?? Date.now)(),
    );
    if (!verdict.ok) {
      this.reject(IdempotencyProblemException.webhookSignatureInvalid(verdict.reason), request);
    }
    this.checkEventId(route, request);
    return true;
  }

  /** The signed bytes; a request without a raw body (`rawBody: true` is off) is refused. */
  private rawBodyOf(request: any): Buffer {
    const signed = signedBodyOf(request);
    if (signed) return signed;
    const label = routeLabelOf(request);
    if (!this.warned.has(label)) {
      this.warned.add(label);
      this.logger.error(
        `${label} cannot check webhook signatures: the raw body of its requests is not kept. ` +
          'Create the application with rawBody: true (NestFactory.create(AppModule, { rawBody: ' +
          'true })); on Express, a content type other than JSON or urlencoded also needs ' +
          "app.useBodyParser('raw') (or 'text'). Until then every delivery is refused with 400.",
      );
    }
    return this.reject(
      IdempotencyProblemException.webhookSignatureInvalid(
        'the server did not keep its raw body, so its signature cannot be checked',
      ),
      request,
    );
  }

  /** The HMAC keys of the route's secrets, from its factory on each delivery. */
  private async keysOf(route: ResolvedWebhookRoute): Promise<readonly Buffer[]> {
    const { secrets } = route;
    const dependencies = secrets.inject.map((token) =>
      this.moduleRef.get(token, { strict: false }),
    );
    return keysOf(
      route.signature.scheme,
      await secrets.useFactory(...dependencies),
      `the secrets factory of @IdempotentWebhook({ provider: '${route.provider}' })`,
    );
  }

  /** A 400 when what the signature covers has no event id that can be a key. */
  private checkEventId(route: ResolvedWebhookRoute, request: any): void {
    const { kind } = webhookEventIdOf(route, request);
    if (kind === 'valid') return;
    const missing = kind === 'missing';
    const problem = new IdempotencyProblemException(
      missing ? 'idempotency_key_missing' : 'idempotency_key_invalid',
      'This webhook delivery was not processed: its event ' +
        (missing
          ? 'has no id to process it once by.'
          : 'id is not 1 to 255 printable ASCII characters.'),
      undefined,
      `Webhook event id is ${missing ? 'missing' : 'invalid'}`,
    );
    this.reject(problem, request);
  }

  private reject(error: IdempotencyProblemException, request: any): never {
    throw emitRejected(this.events, error, { route: routeLabelOf(request) });
  }
}
