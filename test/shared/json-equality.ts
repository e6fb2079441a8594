/**
 * Equality of two parsed JSON values, which is what "the same request body" means (docs/design/contract.md#the-fingerprint
 * fingerprints the canonical JSON of the parsed body): numbers compare as the doubles they parse
 * to (`1.0` = `1`, `-0` = `0`, `1e400` = `2e400` = Infinity), object key order never matters, and
 * only own keys count, so an own `__proto__` key is an ordinary member. Duplicate keys and
 * escapes were already resolved by `JSON.parse` (last wins).
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((v, i) => jsonEqual(v, other[i]));
  }
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every((k) => Object.hasOwn(b, k) && jsonEqual((a as any)[k], (b as any)[k]))
  );
}
