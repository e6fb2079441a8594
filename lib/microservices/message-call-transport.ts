import type { ExecutionContext } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import type { IdempotencyCallTransport } from '../calls/idempotency-call-transport';
import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { IdempotencyMessage } from './idempotent-message.options';
import { acknowledge, settleRefusedEvent } from './message-deliveries';
import { readMessageKey } from './message-key';
import { messageRefusal } from './message-refusals';
import type { MessageKeyReader } from './message-key';

/**
 * The metadata key `@MessagePattern()` and `@EventPattern()` set on their handler, with
 * Nest's `PatternHandler.MESSAGE` (1) or `PatternHandler.EVENT` (2), an enum the package does
 * not export; the same on Nest 11 and 12.
 */
const HANDLER_TYPE_METADATA = 'microservices:handler_type';
const EVENT_HANDLER = 2;
/** The metadata key of the patterns a handler serves. */
const PATTERN_METADATA = 'microservices:pattern';

/**
 * Whether a handler (`ExecutionContext.getHandler()`, always a function) is an `@EventPattern()`
 * handler (no one awaits its answer).
 */
function isEventHandler(handler: object): boolean {
  return Reflect.getMetadata(HANDLER_TYPE_METADATA, handler) === EVENT_HANDLER;
}

/** The pattern a delivery matched, as its transport's context names it, else the handler's first. */
function patternOf(context: any, handler: object): string {
  for (const name of ['getPattern', 'getSubject', 'getTopic', 'getChannel']) {
    const value = typeof context?.[name] === 'function' ? context[name]() : undefined;
    if (typeof value === 'string') return value;
  }
  const patterns: unknown[] | undefined = Reflect.getMetadata(PATTERN_METADATA, handler);
  const first = patterns?.[0];
  return typeof first === 'string' ? first : JSON.stringify(first ?? null);
}

/**
 * The call transport of `@IdempotentMessage()` handlers: reads the key from the message, keeps
 * the record under `MESSAGE` or `EVENT` and the pattern, refuses with an `RpcException` that
 * carries the problem, and settles the RabbitMQ deliveries it answers when acks are manual.
 * @param key - where the key comes from
 * @param ack - whether the library settles the deliveries it answers (`manual`)
 */
export function messageCallTransport(
  key: MessageKeyReader,
  ack: 'auto' | 'manual',
): IdempotencyCallTransport {
  return {
    read(context: ExecutionContext) {
      const rpc = context.switchToRpc();
      const data = rpc.getData();
      const transportContext = rpc.getContext();
      const handler = context.getHandler();
      const event = isEventHandler(handler);
      const message: IdempotencyMessage = {
        kind: event ? 'event' : 'message',
        pattern: patternOf(transportContext, handler),
        data,
        context: transportContext,
      };
      return {
        key: readMessageKey(key, data, transportContext),
        keyPlace: { call: event ? 'event' : 'message', where: key.name },
        method: event ? 'EVENT' : 'MESSAGE',
        path: message.pattern,
        payload: data,
        scopeSource: message,
        namespace: 'message',
      };
    },

    refuse(problem: IdempotencyProblemException, context: ExecutionContext, handlerRan: boolean) {
      const transportContext = context.switchToRpc().getContext();
      // After the handler ran, its delivery is the handler's own to settle, as it did.
      if (ack === 'manual' && !handlerRan) {
        if (isEventHandler(context.getHandler())) settleRefusedEvent(transportContext, problem);
        // A request is answered: its caller has the refusal and decides to send it again.
        else acknowledge(transportContext);
      }
      return new RpcException(messageRefusal(problem));
    },

    replayed(context: ExecutionContext) {
      if (ack === 'manual') acknowledge(context.switchToRpc().getContext());
    },
  };
}
