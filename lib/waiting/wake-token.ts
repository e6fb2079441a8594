import { createHash } from 'node:crypto';

/**
 * The name of a record in wake-up messages: a hash of (scope, key), so the key itself never
 * leaves the instance (PostgreSQL's `NOTIFY` payloads reach every listening session of the
 * database). 128 bits: a collision costs nothing but one waiter looking again.
 * @param scope - the record's scope (normalised, so it holds no NUL)
 * @param key - the idempotency key (printable ASCII)
 */
export function wakeTokenOf(scope: string, key: string): string {
  return createHash('sha256').update(`${scope}\0${key}`).digest('base64url').slice(0, 22);
}
