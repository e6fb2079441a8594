/**
 * `nest-idempotency/webhooks`: inbound webhooks processed once. `@IdempotentWebhook()` verifies
 * a delivery's signature over its raw body (Stripe, Standard Webhooks, a plain HMAC header),
 * then runs the handler once per event id, acknowledging every duplicate delivery.
 *
 * @module nest-idempotency/webhooks
 */
export { IdempotentWebhook } from './idempotent-webhook.decorator';
export {
  DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS,
  IDEMPOTENCY_WEBHOOK_CLOCK,
} from './idempotent-webhook.options';
export type {
  IdempotencyHmacSignature,
  IdempotencyStandardWebhooksSignature,
  IdempotencyStripeSignature,
  IdempotencyWebhookClock,
  IdempotencyWebhookEvent,
  IdempotencyWebhookSecretList,
  IdempotencyWebhookSecrets,
  IdempotencyWebhookSecretsFactory,
  IdempotencyWebhookSignature,
  IdempotentWebhookOptions,
  IdempotentWebhookRouteOptions,
} from './idempotent-webhook.options';
