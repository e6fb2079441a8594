import { createHash } from 'node:crypto';

function asUuid(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The id of the first record of (scope, key), which derived keys come from. It is what the scope
 * and key hash to, not a random one: a record lost with its database (a failover before it was
 * replicated) comes back with the same id, so a provider keyed by `derivedKey()` still charges
 * once. docs/running-in-production.md#failover.
 */
export function firstRecordId(scope: string, key: string): string {
  return asUuid(createHash('sha256').update(`${scope}\u0000${key}`).digest('hex'));
}

/**
 * The id of the record that renews an expired one: the MD5 of the previous id's text, as the
 * claim's SQL computes it (`md5(record_id::text)::uuid`), so a key reused after its TTL is a new
 * request with new derived keys.
 */
export function renewedRecordId(previous: string): string {
  return asUuid(createHash('md5').update(previous).digest('hex'));
}
