/**
 * One string per (scope, key) pair, for the in-process maps keyed by record. The length prefix
 * keeps scope `a:b` with key `c` apart from scope `a` with key `b:c`.
 * @param scope - the record's scope
 * @param key - the idempotency key
 */
export function scopedKey(scope: string, key: string): string {
  return `${scope.length}:${scope}:${key}`;
}
