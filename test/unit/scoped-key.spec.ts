/**
 * scopedKey: one string per (scope, key) pair for the in-process maps, the same string for the
 * same pair asked for again, never one pair's string for another.
 */
import { scopedKey } from '../../lib/storage/local/scoped-key';

describe('scopedKey', () => {
  it('keeps pairs apart whose scope and key run into each other', () => {
    expect(scopedKey('a:b', 'c')).not.toBe(scopedKey('a', 'b:c'));
    expect(scopedKey('', 'a')).not.toBe(scopedKey('a', ''));
  });

  it('gives each pair its own string when pairs alternate, and the same pair the same string', () => {
    const pairs: [string, string][] = [
      ['tenant-1', 'k1'],
      ['tenant-1', 'k2'],
      ['tenant-2', 'k1'],
      ['tenant-1', 'k1'],
    ];
    const ids = pairs.map(([scope, key]) => scopedKey(scope, key));
    expect(new Set(ids).size).toBe(3);
    expect(ids[3]).toBe(ids[0]);
    expect(scopedKey('tenant-1', 'k1')).toBe(scopedKey('tenant-1', 'k1'));
    expect(scopedKey('tenant-1', 'k2')).toBe('8:tenant-1:k2');
  });
});
