/**
 * `@IdempotentMessage()` checks its options when the class is defined: a key source that is
 * none of the three forms, an `ack` other than `auto` or `manual`, a `scope` that is not a
 * function, and the options of HTTP routes (`header`, `wait`, ...) stop the application with an
 * `IdempotencyConfigurationError` that says what to write instead.
 */
import { IdempotencyConfigurationError } from '../../lib';
import { IdempotentMessage } from '../../lib/microservices';
import type { IdempotentMessageOptions } from '../../lib/microservices';

function define(options: unknown): () => void {
  return () => IdempotentMessage(options as IdempotentMessageOptions);
}

describe('@IdempotentMessage() options', () => {
  it('accepts a field, a header or a function as the key, and both kinds of ack', () => {
    expect(define({})).not.toThrow();
    expect(define({ key: { field: 'eventId' }, ack: 'manual' })).not.toThrow();
    expect(define({ key: { header: 'x-idempotency-key' }, ack: 'auto' })).not.toThrow();
    expect(
      define({ key: (data: { id: string }) => data.id, execution: { transactional: true } }),
    ).not.toThrow();
  });

  it.each([
    [{ key: 'eventId' }, 'option "key" is invalid (got "eventId"). Use { field:'],
    [{ key: { field: '' } }, 'option "key" is invalid'],
    [{ key: { field: 'id', header: 'x-id' } }, 'option "key" is invalid'],
    [
      { ack: true },
      `option "ack" is invalid (got true). Use 'manual' when the server runs with noAck: false`,
    ],
    [
      { scope: 'tenant' },
      'option "scope" is invalid (got "tenant"). Use a function (message) => string.',
    ],
    [
      { request: { header: 'Idempotency-Key' } },
      'does not take "request.header": it is an option of HTTP routes.',
    ],
    [{ wait: { maxSeconds: 5 } }, 'does not take "wait"'],
    [{ responses: { storeBody: false } }, 'does not take "responses.storeBody"'],
    [{ responses: { ttlSeconds: -1 } }, 'option "responses.ttlSeconds" is invalid'],
    [{ transactional: true }, 'option "transactional" moved to "execution.transactional"'],
  ])('refuses %j', (options, message) => {
    expect(define(options)).toThrow(IdempotencyConfigurationError);
    expect(define(options)).toThrow(message);
  });
});
