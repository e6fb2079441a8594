import { ReplayCache } from '../../lib/storage/local/replay-cache';
import type { CachedCompletion } from '../../lib/storage/local/replay-cache';

/** A completion whose body is `bodyBytes` long; the entry costs 1024 + key + scope + body bytes. */
function completion(bodyBytes = 10, fingerprint = 'f'): CachedCompletion {
  return {
    recordId: 'r',
    fingerprint,
    response: { status: 201, headers: {}, body: Buffer.alloc(bodyBytes, 'x') },
  };
}

describe('ReplayCache', () => {
  let clock: number;
  const now = () => clock;
  beforeEach(() => (clock = 1_000));

  it('serves an entry until its expiry, and not at or after it', () => {
    const cache = new ReplayCache(10, 1 << 20, now);
    cache.set('s', 'k', completion(), 1_500);
    clock = 1_499;
    expect(cache.get('s', 'k')?.fingerprint).toBe('f');
    clock = 1_500;
    expect(cache.get('s', 'k')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("keeps one key of two scopes apart: alice never gets bob's completion", () => {
    const cache = new ReplayCache(10, 1 << 20, now);
    cache.set('alice', 'order-1', completion(10, 'alice-fp'), 5_000);
    expect(cache.get('bob', 'order-1')).toBeUndefined();
    cache.set('bob', 'order-1', completion(10, 'bob-fp'), 5_000);
    expect(cache.get('alice', 'order-1')?.fingerprint).toBe('alice-fp');
    expect(cache.get('bob', 'order-1')?.fingerprint).toBe('bob-fp');
    expect(cache.get('', 'order-1')).toBeUndefined();
  });

  it('refuses an entry that has already expired', () => {
    const cache = new ReplayCache(10, 1 << 20, now);
    cache.set('s', 'k', completion(), 1_000);
    expect(cache.get('s', 'k')).toBeUndefined();
  });

  it('keeps scopes apart, even when scope and key could be concatenated alike', () => {
    const cache = new ReplayCache(10, 1 << 20, now);
    cache.set('a:b', 'c', completion(1, 'first'), 9_999);
    expect(cache.get('a', 'b:c')).toBeUndefined();
    expect(cache.get('', 'a:b:c')).toBeUndefined();
    expect(cache.get('a:b', 'c')?.fingerprint).toBe('first');
  });

  it('evicts the least recently used entry beyond maxEntries', () => {
    const cache = new ReplayCache(2, 1 << 20, now);
    cache.set('s', 'a', completion(), 9_999);
    cache.set('s', 'b', completion(), 9_999);
    cache.get('s', 'a'); // a is now more recent than b
    cache.set('s', 'c', completion(), 9_999);
    expect(cache.get('s', 'b')).toBeUndefined();
    expect(cache.get('s', 'a')).toBeDefined();
    expect(cache.get('s', 'c')).toBeDefined();
    expect(cache.size).toBe(2);
  });

  it('keeps evicting in order of last use while entries are read, replaced and expire in between', () => {
    const cache = new ReplayCache(3, 1 << 20, now);
    const held = () => ['a', 'b', 'c', 'd', 'e', 'f'].filter((key) => cache.get('s', key));
    for (const key of ['a', 'b', 'c']) cache.set('s', key, completion(), 9_999);
    cache.get('s', 'a'); // order b, c, a
    cache.set('s', 'd', completion(), 9_999); // b evicted: c, a, d
    cache.get('s', 'c'); // a, d, c (the oldest read)
    cache.set('s', 'd', completion(), 9_999); // d replaced: a, c, d
    cache.set('s', 'e', completion(), 9_999); // a evicted: c, d, e
    expect(cache.size).toBe(3);
    cache.set('s', 'f', completion(), 2_000); // c evicted: d, e, f
    clock = 2_000; // f expires and is dropped when read
    expect(held()).toEqual(['d', 'e']);
    expect(cache.size).toBe(2);
    cache.set('s', 'a', completion(), 9_999); // room again: d, e, a — nothing evicted
    expect(held()).toEqual(['a', 'd', 'e']);
  });

  it('evicts by bytes and never holds more than maxBytes', () => {
    // Each entry: 1024 + 1 (scope) + 1 (key) + 100 (body) = 1126 bytes; three fit in 3400.
    const cache = new ReplayCache(100, 3_400, now);
    for (const key of ['a', 'b', 'c', 'd']) cache.set('s', key, completion(100), 9_999);
    expect(cache.get('s', 'a')).toBeUndefined();
    expect(['b', 'c', 'd'].map((key) => cache.get('s', key) !== undefined)).toEqual([
      true,
      true,
      true,
    ]);
  });

  it('counts about 1 KB of bookkeeping per entry on top of its bytes', () => {
    // 1024 + 1 (scope) + 1 (key) + 10 (body) = 1036 bytes.
    const exact = new ReplayCache(100, 1_036, now);
    exact.set('s', 'k', completion(10), 9_999);
    expect(exact.get('s', 'k')).toBeDefined();
    const short = new ReplayCache(100, 1_035, now);
    short.set('s', 'k', completion(10), 9_999);
    expect(short.get('s', 'k')).toBeUndefined();
  });

  it('does not cache a response larger than maxBytes, and keeps what it had', () => {
    const cache = new ReplayCache(100, 2_000, now);
    cache.set('s', 'small', completion(10), 9_999);
    cache.set('s', 'huge', completion(5_000), 9_999);
    expect(cache.get('s', 'huge')).toBeUndefined();
    expect(cache.get('s', 'small')).toBeDefined();
  });

  it('replaces the entry of a key instead of counting it twice', () => {
    // 1326 and 1330 bytes: two fit in 3000, three would not.
    const cache = new ReplayCache(100, 3_000, now);
    cache.set('s', 'k', completion(300, 'old'), 9_999);
    cache.set('s', 'k', completion(300, 'new'), 9_999);
    cache.set('s', 'other', completion(300), 9_999);
    expect(cache.get('s', 'k')?.fingerprint).toBe('new');
    expect(cache.size).toBe(2);
  });

  it('holds nothing when maxEntries is 0 (the cache is off)', () => {
    const cache = new ReplayCache(0, 1 << 20, now);
    cache.set('s', 'k', completion(), 9_999);
    expect(cache.get('s', 'k')).toBeUndefined();
  });
});

describe('ReplayCache memory', () => {
  it('keeps a copy of a body that is a view of a larger buffer, not the larger buffer', () => {
    const parent = Buffer.alloc(64 * 1024, 'p');
    const view = parent.subarray(100, 110);
    const cache = new ReplayCache(10, 1 << 20, () => 0);
    cache.set(
      's',
      'k',
      { recordId: 'r', fingerprint: 'f', response: { status: 200, headers: {}, body: view } },
      1,
    );
    const body = cache.get('s', 'k')!.response.body;
    expect(body.equals(view)).toBe(true);
    expect(body.buffer.byteLength).toBe(10);
  });
});
