import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { parseKeyValue } from '../utils/parse-idempotency-key';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';
import type { IdempotencyMessageKey } from './idempotent-message.options';

/** A key source, checked: reads the raw value of one delivery, and says how it names the key. */
export interface MessageKeyReader {
  /** Where the key is, as refusals name it (`the "idempotencyKey" field`). */
  name: string;
  /** The raw value, as the delivery carries it. */
  read(data: unknown, context: unknown): unknown;
}

/**
 * Checks the `key` option of `@IdempotentMessage()` and makes its reader.
 * @throws IdempotencyConfigurationError when it is none of the three forms
 */
export function messageKeyReader(key: IdempotencyMessageKey): MessageKeyReader {
  if (typeof key === 'function') {
    return { name: 'the value of the key function', read: (data, context) => key(data, context) };
  }
  const field = (key as { field?: unknown } | null)?.field;
  const header = (key as { header?: unknown } | null)?.header;
  if (typeof field === 'string' && field !== '' && header === undefined) {
    return {
      name: `the "${field}" field`,
      read: (data) =>
        typeof data === 'object' && data !== null ? (data as any)[field] : undefined,
    };
  }
  if (typeof header === 'string' && header !== '' && field === undefined) {
    return {
      name: `the "${header}" header`,
      read: (_data, context) => headerOf(context, header),
    };
  }
  throw IdempotencyConfigurationError.invalidOption(
    'key',
    key,
    "Use { field: 'idempotencyKey' }, { header: 'x-idempotency-key' } or a function " +
      '(data, context) => string.',
  );
}

/**
 * The key of one delivery: a string, a finite number, a Buffer or a list of one of them. A key
 * function that throws gives an invalid key: the delivery is refused (and settled) rather than
 * left to fail outside the library.
 * @param reader - the handler's key source
 * @param data - the message's data
 * @param context - the transport's context
 */
export function readMessageKey(
  reader: MessageKeyReader,
  data: unknown,
  context: unknown,
): ParsedIdempotencyKey {
  let value: unknown;
  try {
    value = reader.read(data, context);
  } catch {
    return { kind: 'invalid', reason: 'the key function threw' };
  }
  // A Buffer is a Kafka header's value (as UTF-8); a list of one is a repeated header's.
  if (Array.isArray(value) && value.length === 1) value = value[0];
  return parseKeyValue(Buffer.isBuffer(value) ? value.toString('utf8') : value);
}

/**
 * One header of a delivery, its name matched in any case, from the transport's context: NATS
 * headers (`getHeaders()`: `keys()` and `get()`), RabbitMQ's `properties.headers`, Kafka's
 * message headers. NATS's own `get()` matches names exactly, so its names are listed instead.
 */
function headerOf(context: any, name: string): unknown {
  const named = (header: unknown) => String(header).toLowerCase() === name.toLowerCase();
  const nats = typeof context?.getHeaders === 'function' ? context.getHeaders() : undefined;
  if (nats && typeof nats.get === 'function') {
    const found = (typeof nats.keys === 'function' ? [...nats.keys()] : [name]).find(named);
    // NATS answers '' for a header it does not have.
    return found === undefined ? undefined : nats.get(found) || undefined;
  }
  const message = typeof context?.getMessage === 'function' ? context.getMessage() : undefined;
  const headers = message?.properties?.headers ?? message?.headers;
  if (typeof headers !== 'object' || headers === null) return undefined;
  return Object.entries(headers).find(([header]) => named(header))?.[1];
}
