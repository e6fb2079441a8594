import { UseGuards } from '@nestjs/common';
import { Idempotent } from '../module/idempotent.decorator';
import { setKeySource } from '../decorators/idempotency-key-source';
import { IdempotencyWebhookGuard } from './idempotency-webhook.guard';
import type { IdempotentWebhookOptions } from './idempotent-webhook.options';
import { webhookKeySource } from './webhook-key-source';
import { resolveWebhookRoute, WEBHOOK_ROUTE_METADATA } from './webhook-route';

/**
 * Makes a webhook route process each event once, however many times the provider delivers it.
 *
 * The delivery's signature is verified over the raw body first (Stripe's scheme, the Standard
 * Webhooks spec, or a plain HMAC header such as GitHub's), with every configured secret and in
 * constant time: a missing, forged or stale signature is refused with 400
 * `idempotency_webhook_signature_invalid`, and nothing runs or is stored. The event id of a
 * verified delivery, read from what its signature covers (Stripe's body `id`, the signed
 * `webhook-id`, the SHA-256 of an HMAC-signed body), is then the idempotency key, under the
 * scope `webhook:<provider>` (a namespace no HTTP route's scope can name): the
 * first delivery runs the handler and its answer is stored; a duplicate gets that answer back
 * (2xx, `Idempotent-Replayed: true`) without running it; one that comes while the first runs
 * gets 409 (the provider retries); a failed run (5xx, a throw) gives the key back, so the
 * provider's own retry runs it again. Needs the raw body: create the app with `rawBody: true`.
 *
 * Other options are those of `@Idempotent()` (`execution`, `responses`, ...). Put it on a
 * handler of a controller without a class-level `@Idempotent()`.
 *
 * @param options - the provider's name, its signature scheme, its secrets, and route options
 * @throws IdempotencyConfigurationError when an option is invalid (at class definition)
 * @example
 * \@Post('webhooks/stripe')
 * \@HttpCode(200)
 * \@IdempotentWebhook({
 *   provider: 'stripe',
 *   signature: { scheme: 'stripe' },
 *   secrets: { inject: [ConfigService], useFactory: (config: ConfigService) => config.getOrThrow('STRIPE_WEBHOOK_SECRET') },
 *   execution: { transactional: true },
 * })
 * receive(@Body() event: Stripe.Event) { ... }
 */
export function IdempotentWebhook(options: IdempotentWebhookOptions): MethodDecorator {
  const route = resolveWebhookRoute(options);
  // The route options alone: the webhook's own settings stay out of the route's metadata.
  const rest: Record<string, unknown> = { ...options };
  for (const own of ['provider', 'signature', 'secrets', 'key', 'unsignedKeyHeader']) {
    delete rest[own];
  }
  const idempotent = Idempotent({
    ...rest,
    // The provider, in the `webhook` namespace its key source names: `webhook:<provider>`.
    request: { scope: () => route.provider, required: true },
  });
  return (target, propertyKey, descriptor) => {
    // Its guard first: the signature is checked before the idempotency guard asks for the key.
    UseGuards(IdempotencyWebhookGuard)(target, propertyKey, descriptor);
    idempotent(target, propertyKey, descriptor);
    // On the function Nest routes to, once @Idempotent() wrapped it.
    Reflect.defineMetadata(WEBHOOK_ROUTE_METADATA, route, descriptor.value as object);
    setKeySource(descriptor.value as object, webhookKeySource(route));
    return descriptor;
  };
}
