import type {
  IdempotencyRequestOptions,
  IdempotencyResponseOptions,
  IdempotencyRouteOptions,
} from '../interfaces/idempotency-module-options.interface';

/**
 * One delivery of a message or an event, as a key function and the `scope` function get it.
 */
export interface IdempotencyMessage {
  /** `message` for a `@MessagePattern()` handler (a reply is awaited), `event` for `@EventPattern()`. */
  kind: 'message' | 'event';
  /** The pattern the delivery matched, as the transport names it (`orders.create`, `{"cmd":"sum"}`). */
  pattern: string;
  /** The message's data, as the handler gets it. */
  data: any;
  /** The transport's context (`RmqContext`, `NatsContext`, `KafkaContext`, ...), as `@Ctx()` gives it. */
  context: any;
}

/**
 * Where a message's key comes from:
 * - `{ field }`: a field of the message's data (a top-level property of the payload object);
 * - `{ header }`: a header of the message (RabbitMQ's `properties.headers`, NATS headers, Kafka
 *   headers; the name in any case);
 * - a function of the data and the transport's context, for anything else (RabbitMQ's
 *   `properties.messageId`, a nested field).
 *
 * A key is a string of 1 to 255 printable ASCII characters, or a finite number (used as its
 * decimal text); `undefined`, `null` and `''` mean no key.
 */
export type IdempotencyMessageKey =
  | {
      /** A top-level property of the message's data. */
      field: string;
    }
  | {
      /** A header of the message, in any case. */
      header: string;
    }
  | ((data: any, context: any) => unknown);

/** What the `scope` of `@IdempotentMessage()` returns: as the module's `scope` does. */
export type IdempotencyMessageScope = (
  message: IdempotencyMessage,
) => string | number | bigint | undefined | null;

/**
 * The route options `@IdempotentMessage()` passes on, as `@Idempotent()` takes them: not those
 * of an HTTP request (`request.header`, `request.fingerprintHeaders`, `responses.replayHeaders`,
 * `responses.storeStatuses`), nor `wait` and `responses.storeBody`, which calls do not support;
 * `scope` is its own (it gets the message).
 * @interface
 */
export type IdempotentMessageRouteOptions = Omit<
  IdempotencyRouteOptions,
  'request' | 'responses' | 'wait'
> & {
  /** Whether a message without a key is refused, and the largest payload compared. */
  request?: Partial<Pick<IdempotencyRequestOptions, 'required' | 'maxRequestBytes'>>;
  /** How long a result is kept, and the largest one stored. */
  responses?: Partial<Pick<IdempotencyResponseOptions, 'ttlSeconds' | 'maxResponseBytes'>>;
};

/** Options of `@IdempotentMessage()`: where the key comes from, acks, scope and route options. */
export interface IdempotentMessageOptions extends IdempotentMessageRouteOptions {
  /**
   * Where each delivery's key comes from.
   * @defaultValue `DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS.key` (`{ field: 'idempotencyKey' }`)
   */
  key?: IdempotencyMessageKey;
  /**
   * How deliveries are acknowledged: `auto` when the server acknowledges them itself (Nest's
   * default, RabbitMQ `noAck: true`), `manual` when the handler does (`noAck: false`). With
   * `manual`, a RabbitMQ delivery the library answers without running the handler is settled by
   * the library: acknowledged when it is a duplicate or a refused request, put back on the queue
   * (after `retryAfterSeconds`) when it is an event whose first delivery is still running or the
   * store is down, rejected (dead-lettered when the queue has a dead-letter exchange) when it is
   * an event without a valid key or whose key was used with other data.
   * @defaultValue `DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS.ack` (`auto`)
   */
  ack?: 'auto' | 'manual';
  /**
   * The scope of the delivery's key; keys are unique per scope. By default, the pattern: the
   * same key on two patterns names two messages. Records are kept under `message:<scope>`, a
   * namespace no HTTP route's scope can name (a caller's scope that starts with `message:` is
   * hashed).
   * @defaultValue `DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS.scope` (`<pattern>`)
   */
  scope?: IdempotencyMessageScope;
}

/** The defaults of `@IdempotentMessage()`'s own options. */
export const DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS = Object.freeze({
  /** The key is the data's `idempotencyKey` field. */
  key: Object.freeze({
    /** The field's name. */
    field: 'idempotencyKey' as string,
  }),
  /** The server acknowledges deliveries itself (Nest's default). */
  ack: 'auto' as 'auto' | 'manual',
  /** One key space per pattern: records under `message:<pattern>`. */
  scope: ((message: IdempotencyMessage) => message.pattern) as IdempotencyMessageScope,
});
