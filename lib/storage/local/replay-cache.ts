import type { StoredResponse } from '../../interfaces/idempotency-record.interface';
import { scopedKey } from './scoped-key';

/** A completed record as the replay cache holds it. */
export interface CachedCompletion {
  recordId: string;
  fingerprint: string;
  response: StoredResponse;
}

interface CacheEntry extends CachedCompletion {
  /** When the entry stops being served, on the cache's clock (never after the record expires). */
  expiresAt: number;
  bytes: number;
}

/** What an entry costs beyond its body and header bytes (map slot, objects, strings). */
const ENTRY_OVERHEAD_BYTES = 256;

function headerBytes(headers: StoredResponse['headers']): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(headers)) {
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
 */
export class ReplayCache {
  private readonly entries = new Map<string, CacheEntry>();
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
    const id = scopedKey(scope, key);
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    this.remove(id, entry);
    if (entry.expiresAt <= this.now()) return undefined;
    // Re-inserted last: the Map's order is least recently used first.
    this.entries.set(id, entry);
    this.bytes += entry.bytes;
    return entry;
  }

  /**
   * Caches a completed record.
   * @param expiresAt - on `now()`'s clock; at the latest when the record expires in the store
   */
  set(scope: string, key: string, completion: CachedCompletion, expiresAt: number): void {
    if (this.maxEntries === 0 || !(expiresAt > this.now())) return;
    const bytes =
      ENTRY_OVERHEAD_BYTES +
      scope.length +
      key.length +
      completion.response.body.length +
      headerBytes(completion.response.headers);
    if (bytes > this.maxBytes) return;
    const id = scopedKey(scope, key);
    const previous = this.entries.get(id);
    if (previous) this.remove(id, previous);
    const { status, headers, body } = completion.response;
    this.entries.set(id, {
      recordId: completion.recordId,
      fingerprint: completion.fingerprint,
      response: { status, headers, body: ownCopy(body) },
      expiresAt,
      bytes,
    });
    this.bytes += bytes;
    for (const [oldId, oldest] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.remove(oldId, oldest);
    }
  }

  private remove(id: string, entry: CacheEntry): void {
    this.entries.delete(id);
    this.bytes -= entry.bytes;
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
