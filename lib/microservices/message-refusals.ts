import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { ParsedIdempotencyKey } from '../utils/parse-idempotency-key';

/** What the refusal of a message carries to its caller (an `RpcException`'s error). */
export interface IdempotencyMessageRefusal {
  /** The HTTP status the same refusal has on a route (409 in use, 422 reused, 503 store down). */
  status: number;
  /** The stable code (`idempotency_key_reused`, ...). */
  code: string;
  /** Short summary of the code. */
  title: string;
  /** What went wrong with this message; never contains the key. */
  detail: string;
  /** When to send it again, in seconds, for a refusal a retry can get past (409, 503). */
  retryAfterSeconds?: number;
}

/**
 * A refusal as a message's caller reads it: the codes about the key say where the message's key
 * is (`the "idempotencyKey" field`) rather than name an HTTP header; the others are as on a route.
 * @param problem - the library's refusal
 * @param keyName - where the key is, as refusals name it
 * @param key - the delivery's key, read again for the reason it is invalid
 */
export function messageRefusal(
  problem: IdempotencyProblemException,
  keyName: string,
  key: () => ParsedIdempotencyKey,
): IdempotencyMessageRefusal {
  let { title, detail } = problem;
  switch (problem.code) {
    case 'idempotency_key_missing':
      title = 'The message has no idempotency key';
      detail = `This message needs a key in ${keyName}: a unique value, the same on every resend of the message.`;
      break;
    case 'idempotency_key_invalid': {
      const parsed = key();
      const reason = parsed.kind === 'invalid' ? `${parsed.reason}. ` : '';
      title = 'The message has an invalid idempotency key';
      detail = `The key in ${keyName} is invalid: ${reason}Send 1 to 255 printable ASCII characters.`;
      break;
    }
    case 'idempotency_key_reused':
      title = 'The idempotency key is already used';
      detail = `The key in ${keyName} was already used with other data. Use a new key for a new message.`;
      break;
    case 'idempotency_key_in_use':
      title = 'A message with this idempotency key is being processed';
      detail = `A message with the key in ${keyName} is still being processed. Send it again after it finishes.`;
      break;
  }
  const refusal: IdempotencyMessageRefusal = {
    status: problem.getStatus(),
    code: problem.code,
    title,
    detail,
  };
  if (problem.retryAfterSeconds !== undefined)
    refusal.retryAfterSeconds = problem.retryAfterSeconds;
  return refusal;
}
