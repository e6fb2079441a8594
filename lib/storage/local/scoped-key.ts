import { internalEnabled } from '../../internals/internal-switch';

const MEMO = internalEnabled('scoped-key-memo');

/** The pair `scopedKey` last made its string for: one request asks for it several times in a row. */
let last = { scope: '', key: '', id: '0::' };

/**
 * One string per (scope, key) pair, for the in-process maps keyed by record. The length prefix
 * keeps scope `a:b` with key `c` apart from scope `a` with key `b:c`. The last pair's string is
 * given again as it is: a first execution looks its key up five or six times before its claim
 * is sent, and a string the maps have seen keeps its hash.
 * @param scope - the record's scope
 * @param key - the idempotency key
 */
export function scopedKey(scope: string, key: string): string {
  if (!MEMO) return `${scope.length}:${scope}:${key}`;
  if (scope === last.scope && key === last.key) return last.id;
  last = { scope, key, id: `${scope.length}:${scope}:${key}` };
  return last.id;
}
