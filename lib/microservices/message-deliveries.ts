import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';

/** A RabbitMQ delivery and the channel it came on, as `RmqContext` holds them. */
interface RabbitDelivery {
  channel: {
    ack(message: unknown): void;
    nack(message: unknown, allUpTo?: boolean, requeue?: boolean): void;
  };
  message: unknown;
}

/** The delivery behind a context, when it is RabbitMQ's (a channel to settle it on). */
function rabbitDeliveryOf(context: any): RabbitDelivery | undefined {
  const channel = context?.getChannelRef?.();
  if (typeof channel?.ack !== 'function' || typeof channel.nack !== 'function') return undefined;
  const message = context.getMessage?.();
  return message ? { channel, message } : undefined;
}

/**
 * Settles a delivery: acknowledges it, or rejects it back onto its queue or not. A channel that
 * closed meanwhile has given it back to the queue already.
 */
function settle({ channel, message }: RabbitDelivery, how: 'ack' | 'requeue' | 'reject'): void {
  try {
    if (how === 'ack') channel.ack(message);
    else channel.nack(message, false, how === 'requeue');
  } catch {
    // The channel is closed: RabbitMQ requeues what it had not settled.
  }
}

/**
 * Acknowledges a delivery the library answered without running the handler (with `ack:
 * 'manual'`; otherwise the server did). Transports without acknowledgements (NATS core, TCP,
 * Redis) have nothing to settle.
 * @param context - the transport's context
 */
export function acknowledge(context: unknown): void {
  const delivery = rabbitDeliveryOf(context);
  if (delivery) settle(delivery, 'ack');
}

/**
 * Settles an event the library refused (with `ack: 'manual'`): no one awaits its answer, so the
 * queue is how it is tried again. An event whose key is in use (its first delivery still runs)
 * or that met the store down or another 5xx goes back on the queue after the refusal's
 * `Retry-After`, so it is tried again without spinning; one refused for good (no valid key, a
 * key used with other data) is rejected without requeueing: dead-lettered when its queue has a
 * dead-letter exchange, else dropped. One that ran before but whose answer was not kept is
 * acknowledged.
 * @param context - the transport's context
 * @param problem - the refusal
 */
export function settleRefusedEvent(context: unknown, problem: IdempotencyProblemException): void {
  const delivery = rabbitDeliveryOf(context);
  if (!delivery) return;
  if (problem.code === 'idempotency_response_not_stored') {
    // It ran: only its answer, which no one awaits, was not kept.
    return settle(delivery, 'ack');
  }
  const status = problem.getStatus();
  if (status !== 409 && status < 500) return settle(delivery, 'reject');
  const delayMs = (problem.retryAfterSeconds ?? 1) * 1000;
  setTimeout(() => settle(delivery, 'requeue'), delayMs).unref();
}
