import { idempotentCall } from '../calls/idempotency-call-transport';
import { Idempotent } from '../module/idempotent.decorator';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { check, refuseOptionsSet } from '../config/option-groups';
import { DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS } from './idempotent-message.options';
import type { IdempotencyMessage, IdempotentMessageOptions } from './idempotent-message.options';
import { messageCallTransport } from './message-call-transport';
import { messageKeyReader } from './message-key';

/** Route options of HTTP requests, or of features calls do not have. */
const NOT_FOR_MESSAGES = [
  'request.header',
  'request.fingerprintHeaders',
  'responses.replayHeaders',
  'responses.storeStatuses',
  'wait',
  'responses.storeBody',
];

/**
 * Makes a `@MessagePattern()` or `@EventPattern()` handler run once per key, however many times
 * the message is sent or delivered.
 *
 * The key comes from the message (a field of its data by default, `idempotencyKey`; or a
 * header; or a function). The first delivery runs the handler and its result is stored; every
 * later delivery of the key gets that result back without running it (a request's caller gets
 * it as its reply; a duplicate event is acknowledged). A delivery that comes while the first
 * runs is refused with `idempotency_key_in_use`, one with the key and other data with
 * `idempotency_key_reused`, and when the store is unreachable nothing runs
 * (`idempotency_store_unavailable`): a request's caller gets an `RpcException` carrying
 * `{ status, code, title, detail }`. A handler that throws gives the key back, so the next
 * delivery runs it.
 *
 * Other options are those of `@Idempotent()` (`execution`, `responses`, ...).
 *
 * @param options - where the key comes from, how deliveries are acknowledged, and route options
 * @throws IdempotencyConfigurationError when an option is invalid (at class definition)
 * @example
 * \@EventPattern<string>('payments.settled')
 * \@IdempotentMessage({
 *   key: { field: 'eventId' },
 *   ack: 'manual',
 *   execution: { transactional: true },
 * })
 * async settled(\@Payload() event: PaymentSettled, \@Ctx() context: RmqContext) {
 *   await this.ledger.record(event);
 *   context.getChannelRef().ack(context.getMessage());
 * }
 */
export function IdempotentMessage(options: IdempotentMessageOptions = {}): MethodDecorator {
  // The route options alone: the decorator's own settings stay out of the route's metadata.
  const { key: keyOption, ack: ackOption, scope: scopeOption, ...given } = options;
  refuseOptionsSet(
    given,
    NOT_FOR_MESSAGES,
    (place) => `@IdempotentMessage() does not take "${place}": it is an option of HTTP routes.`,
  );
  const ack = ackOption ?? DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS.ack;
  const ackFix = "Use 'manual' when the server runs with noAck: false, else 'auto'.";
  check(ack === 'auto' || ack === 'manual', 'ack', ack, ackFix);
  const scope = scopeOption ?? DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS.scope;
  if (typeof scope !== 'function') {
    throw IdempotencyConfigurationError.invalidOption(
      'scope',
      scope,
      'Use a function (message) => string.',
    );
  }
  const key = messageKeyReader(keyOption ?? DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS.key);
  const idempotent = Idempotent({
    ...given,
    request: { ...given.request, scope: (message: IdempotencyMessage) => scope(message) },
  });
  return idempotentCall(idempotent, messageCallTransport(key, ack));
}
