import type { StoredResponse } from '../../interfaces/idempotency-record.interface';
import { scopedKey } from './scoped-key';

/** A completed record as the replay cache holds it. */
export interface CachedCompletion {
  recordId: string;
  fingerprint: string;
  response: StoredResponse;
}

/** An entry, linked into the recency list: `older` is evicted before it, `newer` after it. */
interface CacheEntry extends CachedCompletion {
  readonly id: string;
  /** When the entry stops being served, on the cache's clock (never after the record expires). */
  readonly expiresAt: number;
  readonly bytes: number;
  older: CacheEntry | undefined;
  newer: CacheEntry | undefined;
}

/**
 * What an entry costs beyond its body, header, scope and key bytes: its objects, the body's
 * buffer, the fingerprint, record id and map key strings, the map slot. Measured with V8's heap
 * after a full collection: 1.1–1.2 KB per entry for bodies of 10 B to 4 KB (BENCHMARKS.md).
 */
const ENTRY_OVERHEAD_BYTES = 1024;

function headerBytes(headers: StoredResponse['headers']): number {
  let bytes = 0;
  for (const name in headers) {
    const value = headers[name];
    bytes += name.length + (Array.isArray(value) ? value.join('').length : value.length);
  }
  return bytes;
}

/**
 * A bounded, in-process cache of completed records, so a replay on this instance skips the
 * database. Sound because a completed record never changes until it expires: every entry
 * expires no later than its record (its expiry is measured from before the record's expiry was
 * read or written), and it is served only to the same scope and key with the same fingerprint.
 * Least recently used entries are evicted first once `maxEntries` or `maxBytes` is reached.
 *
 * Recency is a linked list through the entries, not the `Map`'s insertion order: V8 keeps a
 * deleted `Map` entry in its hash chain and its iteration order until the table is rebuilt, so
 * re-inserting a key on every hit and evicting from the front of a 10 000-entry map cost
 * 18–37 µs and 9 µs per operation (measured on Node 20); moving a list node costs nothing.
 */
export class ReplayCache {
  private readonly entries = new Map<string, CacheEntry>();
  /** Least recently used first. */
  private oldest?: CacheEntry;
  private newest?: CacheEntry;
  private bytes = 0;

  /**
   * @param maxEntries - entries kept at most; 0 turns the cache off
   * @param maxBytes - body, header and bookkeeping bytes kept at most
   * @param now - monotonic clock in milliseconds (injected by tests)
   */
  constructor(
    private readonly maxEntries: number,
    private readonly maxBytes: number,
    readonly now: () => number = () => performance.now(),
  ) {}

  /** Entries held now. */
  get size(): number {
    return this.entries.size;
  }

  /** The completed record of this scope and key, if it is cached and not expired. */
  get(scope: string, key: string): CachedCompletion | undefined {
    if (this.maxEntries === 0) return undefined;
    const entry = this.entries.get(scopedKey(scope, key));
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.remove(entry);
      return undefined;
    }
    this.unlink(entry);
    this.append(entry);
    return entry;
  }

  /**
   * Caches a completed record.
   * @param expiresAt - on `now()`'s clock; at the latest when the record expires in the store
   */
  set(scope: string, key: string, completion: CachedCompletion, expiresAt: number): void {
    if (this.maxEntries === 0 || !(expiresAt > this.now())) return;
    const { status, headers, body } = completion.response;
    const bytes =
      ENTRY_OVERHEAD_BYTES + scope.length + key.length + body.length + headerBytes(headers);
    if (bytes > this.maxBytes) return;
    const id = scopedKey(scope, key);
    const previous = this.entries.get(id);
    if (previous) this.remove(previous);
    const entry: CacheEntry = {
      id,
      recordId: completion.recordId,
      fingerprint: completion.fingerprint,
      response: { status, headers, body: ownCopy(body) },
      expiresAt,
      bytes,
      older: undefined,
      newer: undefined,
    };
    this.entries.set(id, entry);
    this.append(entry);
    this.bytes += bytes;
    while (this.oldest && (this.entries.size > this.maxEntries || this.bytes > this.maxBytes)) {
      this.remove(this.oldest);
    }
  }

  private remove(entry: CacheEntry): void {
    this.entries.delete(entry.id);
    this.unlink(entry);
    this.bytes -= entry.bytes;
  }

  /** Makes the entry the most recently used. */
  private append(entry: CacheEntry): void {
    entry.older = this.newest;
    entry.newer = undefined;
    if (this.newest) this.newest.newer = entry;
    else this.oldest = entry;
    this.newest = entry;
  }

  private unlink(entry: CacheEntry): void {
    if (entry.older) entry.older.newer = entry.newer;
    else this.oldest = entry.newer;
    if (entry.newer) entry.newer.older = entry.older;
    else this.newest = entry.older;
    entry.older = entry.newer = undefined;
  }
}

/**
 * The bytes in a buffer of their own. A small Buffer is usually a view of a larger one (Node's
 * 8 KiB allocation pool, a socket read): caching the view would keep the whole parent alive and
 * make `maxBytes` a lie.
 */
function ownCopy(body: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(body.length);
  body.copy(copy);
  return copy;
}
