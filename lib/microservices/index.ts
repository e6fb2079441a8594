/**
 * `nest-idempotency/microservices`: Nest microservice handlers run once per key.
 * `@IdempotentMessage()` on a `@MessagePattern()` handler replies to every resend of a key with
 * the stored result; on an `@EventPattern()` handler a redelivered event is acknowledged
 * without running again. Needs `@nestjs/microservices` (an optional peer of the package).
 *
 * @module nest-idempotency/microservices
 */
export { IdempotentMessage } from './idempotent-message.decorator';
export { DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS } from './idempotent-message.options';
export type {
  IdempotencyMessage,
  IdempotencyMessageKey,
  IdempotencyMessageScope,
  IdempotentMessageOptions,
  IdempotentMessageRouteOptions,
} from './idempotent-message.options';
export type { IdempotencyMessageRefusal } from './message-refusals';
