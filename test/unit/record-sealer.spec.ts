/**
 * Encryption at rest, below the store: the `encryption` option is validated at bootstrap (ids,
 * 32-byte secrets, never echoed), and `RecordSealer` seals a response's headers and body (and an
 * operation's input or state) with AES-256-GCM bound to its record's scope and key, a response
 * to its record id and fingerprint, a state to its recovery point: a round trip gives the exact
 * bytes back, a changed byte or another record's scope, key, id or fingerprint fails to open, a
 * format 1 blob opens only while `plaintextUntil` lets it, a
 * record sealed with an older key opens while that key is still listed, and one whose key is gone
 * is `idempotency_record_unreadable` with a log naming the key id only.
 */
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { Logger } from '@nestjs/common';
import { IdempotencyConfigurationError, IdempotencyProblemException } from '../../lib';
import { resolveIdempotencyOptions } from '../../lib/config/idempotency.defaults';
import type { StoredResponse } from '../../lib/interfaces/idempotency-record.interface';
import { resolveEncryptionOptions } from '../../lib/config/encryption-options';
import { RecordSealer, SEALED_MARKER, SEALED_STATUS } from '../../lib/storage/sealed/record-sealer';
import { legacySealedBody } from '../fixtures/legacy-seal';

const OLD = randomBytes(32).toString('base64');
const NEW = randomBytes(32);

function sealer(...keys: Array<{ id: string; secret: string | Uint8Array }>): RecordSealer {
  return new RecordSealer(resolveEncryptionOptions(keys.length ? { keys } : null));
}

/** The record a response answers: what its seal binds beside the scope and key. */
const RECORD = { recordId: '8d7c1f52-0c3a-4c57-9d7e-1f3b5a0e6a11', fingerprint: 'f'.repeat(64) };
const AT = [RECORD.recordId, RECORD.fingerprint] as const;

const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json', location: '/orders/7', etag: ['"a"', '"b"'] },
  body: Buffer.from('{"id":7,"card":"4242 4242 4242 4242"}'),
};

/** The problem a failed open throws; fails the test when nothing is thrown. */
function unreadable(open: () => unknown): IdempotencyProblemException {
  try {
    open();
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyProblemException);
    return error as IdempotencyProblemException;
  }
  throw new Error('expected idempotency_record_unreadable, the record opened');
}

describe('RecordSealer', () => {
  let logged: string[];
  beforeEach(() => {
    logged = [];
    jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => {
      logged.push(String(message));
    });
  });
  afterEach(() => jest.restoreAllMocks());

  const sealing = sealer({ id: 'k1', secret: OLD });

  it('seals headers and body together, keeps the status clear, and opens them byte for byte', () => {
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    expect(sealed.status).toBe(201);
    expect(sealed.headers).toEqual({ [SEALED_MARKER]: 'k1' });
    expect(sealed.body.includes('4242')).toBe(false);
    expect(sealed.body.includes('/orders/7')).toBe(false);
    // format byte, 12-byte IV, 16-byte tag, then the headers' length, JSON and the body
    const headersJson = Buffer.byteLength(
      JSON.stringify({ ...RESPONSE.headers, [SEALED_STATUS]: '201' }),
    );
    expect(sealed.body.length).toBe(1 + 12 + 16 + 4 + headersJson + RESPONSE.body.length);
    const opened = sealing.openResponse('alice', 'key-1', sealed, 'record 1', ...AT);
    expect(opened.status).toBe(201);
    expect(opened.headers).toEqual(RESPONSE.headers);
    expect(opened.body.equals(RESPONSE.body)).toBe(true);
  });

  it('keeps bytes that are not UTF-8, and an empty body', () => {
    const binary = { status: 200, headers: {}, body: Buffer.from([0xff, 0x00, 0xc3, 0x28]) };
    const opened = sealing.openResponse(
      '',
      'k',
      sealing.sealResponse('', 'k', binary, RECORD),
      'r',
      ...AT,
    );
    expect(opened.body.equals(binary.body)).toBe(true);
    const empty = { status: 204, headers: {}, body: Buffer.alloc(0) };
    expect(
      sealing.openResponse('', 'k', sealing.sealResponse('', 'k', empty, RECORD), 'r', ...AT),
    ).toEqual(empty);
  });

  it('uses a new IV for every seal: the same response never seals to the same bytes', () => {
    const a = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD).body;
    const b = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD).body;
    expect(a.subarray(1, 13).equals(b.subarray(1, 13))).toBe(false);
    expect(a.equals(b)).toBe(false);
  });

  it.each([
    ['the format byte', 0],
    ['the IV', 5],
    ['the tag', 20],
    ['the ciphertext', 40],
    ['the last byte', -1],
  ])('refuses a blob with a changed byte in %s', (_, at) => {
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    const body = Buffer.from(sealed.body);
    const index = at < 0 ? body.length + at : at;
    body[index] ^= 0x01;
    const error = unreadable(() =>
      sealing.openResponse('alice', 'key-1', { ...sealed, body }, 'The record 9', ...AT),
    );
    expect(error.code).toBe('idempotency_record_unreadable');
    expect(error.getStatus()).toBe(500);
    expect(logged.join('\n')).toContain(
      'The record 9 could not be opened with encryption key "k1"',
    );
  });

  it('refuses a truncated blob', () => {
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    unreadable(() =>
      sealing.openResponse(
        'alice',
        'key-1',
        { ...sealed, body: sealed.body.subarray(0, 20) },
        'r',
        ...AT,
      ),
    );
  });

  it.each([
    ['another scope', 'bob', 'key-1'],
    ['another key', 'alice', 'key-2'],
  ])('refuses a sealed response moved to a record of %s (AAD)', (_, scope, key) => {
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    expect(unreadable(() => sealing.openResponse(scope, key, sealed, 'r', ...AT)).code).toBe(
      'idempotency_record_unreadable',
    );
  });

  it('refuses a sealed input opened as state, or relabelled with another key id', () => {
    const input = sealing.sealValue('input', 'alice', 'key-1', { amount: 5 });
    unreadable(() => sealing.openValue('state', 'alice', 'key-1', input, 'r'));
    const two = sealer({ id: 'k1', secret: OLD }, { id: 'k2', secret: OLD });
    const relabelled = { ...(input as object), [SEALED_MARKER]: 'k2' };
    unreadable(() => two.openValue('input', 'alice', 'key-1', relabelled, 'r'));
  });

  it('seals operation input and state as JSON objects and opens them', () => {
    const state = { ledgerId: 3, providerId: 'tr_1', nested: { ok: true } };
    const sealed = sealing.sealValue('state', 'alice', 'key-1', state);
    expect(Object.keys(sealed as object).sort()).toEqual(['sealed', SEALED_MARKER].sort());
    expect(JSON.stringify(sealed)).not.toContain('tr_1');
    expect(sealing.openValue('state', 'alice', 'key-1', sealed, 'r')).toEqual(state);
    const input = sealing.sealValue('input', 'alice', 'key-1', undefined);
    expect(sealing.openValue('input', 'alice', 'key-1', input, 'r')).toBeNull();
  });

  it('reads what was stored in the clear (before encryption) as it is until plaintextUntil', () => {
    const keys = [{ id: 'k1', secret: OLD }];
    const until = new Date(Date.now() + 60_000);
    const reading = new RecordSealer(resolveEncryptionOptions({ keys, plaintextUntil: until }));
    expect(reading.openResponse('a', 'k', RESPONSE, 'r', ...AT)).toBe(RESPONSE);
    const state = { ledgerId: 1 };
    expect(reading.openValue('state', 'a', 'k', state, 'r')).toBe(state);
    expect(reading.openValue('input', 'a', 'k', null, 'r')).toBeNull();
    const past = new RecordSealer(
      resolveEncryptionOptions({ keys, plaintextUntil: '2020-01-01T00:00:00Z' }),
    );
    for (const strict of [sealing, past]) {
      expect(
        unreadable(() => strict.openResponse('a', 'k', RESPONSE, 'r', ...AT)).getStatus(),
      ).toBe(500);
      unreadable(() => strict.openValue('state', 'a', 'k', state, 'r', 'reserved'));
      unreadable(() => strict.openValue('input', 'a', 'k', {}, 'r', 'started'));
      // The empty state the store gives an operation that has not advanced is not sealed.
      expect(strict.openValue('state', 'a', 'k', {}, 'r', 'started')).toEqual({});
    }
    expect(logged.join('\n')).toContain('encryption.plaintextUntil is not set');
    expect(logged.join('\n')).toContain('(2020-01-01T00:00:00.000Z) has passed');
  });

  it('refuses a sealed response whose clear status or stored headers were changed', () => {
    const sealed = sealing.sealResponse('alice', 'key-1', { ...RESPONSE, status: 402 }, RECORD);
    unreadable(() =>
      sealing.openResponse('alice', 'key-1', { ...sealed, status: 201 }, 'r', ...AT),
    );
    const extra = { ...sealed.headers, location: '/elsewhere' };
    unreadable(() =>
      sealing.openResponse('alice', 'key-1', { ...sealed, headers: extra }, 'r', ...AT),
    );
    expect(logged.join('\n')).toContain('has the status 201 in its row but 402 under its seal');
    expect(sealing.openResponse('alice', 'key-1', sealed, 'r', ...AT).status).toBe(402);
  });

  it.each([
    // Sealed before the status was sealed with it too: opened with the row status.
    ['1 (sealed before the record was bound)', 1, RESPONSE.headers],
    [
      "3 (an earlier build's completer or operator)",
      3,
      { ...RESPONSE.headers, [SEALED_STATUS]: '201' },
    ],
  ] as const)('opens a format %s blob only while plaintextUntil lets it', (_, format, headers) => {
    const blob = legacySealedBody(
      { id: 'k1', secret: OLD },
      'a',
      'k',
      { ...RESPONSE, headers },
      format,
    );
    const stored = { status: 201, headers: { [SEALED_MARKER]: 'k1' }, body: blob };
    const keys = [{ id: 'k1', secret: OLD }];
    const until = new Date(Date.now() + 60_000);
    const upgrading = new RecordSealer(resolveEncryptionOptions({ keys, plaintextUntil: until }));
    expect(upgrading.openResponse('a', 'k', stored, 'r', ...AT)).toEqual(RESPONSE);
    unreadable(() => upgrading.openResponse('a', 'k2', stored, 'r', ...AT));
    unreadable(() => sealing.openResponse('a', 'k', stored, 'The record 5', ...AT));
    expect(logged.join('\n')).toContain(
      'The record 5 is sealed in a format of a build before the record it answers was bound',
    );
    // Its format byte set to 2 does not open: the format is authenticated.
    const body = Buffer.from(blob);
    body[0] = 2;
    unreadable(() => upgrading.openResponse('a', 'k', { ...stored, body }, 'r', ...AT));
  });

  it.each([
    [
      'another record id (an earlier record of the key)',
      'c4f0b0d6-2f1e-4a34-8f0e-5b9d2b1f7e20',
      RECORD.fingerprint,
    ],
    ['another fingerprint (another request)', RECORD.recordId, 'e'.repeat(64)],
  ])('refuses a sealed response opened for %s', (_, recordId, fingerprint) => {
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    unreadable(() => sealing.openResponse('alice', 'key-1', sealed, 'r', recordId, fingerprint));
    expect(sealing.openResponse('alice', 'key-1', sealed, 'r', ...AT)).toEqual(RESPONSE);
  });

  it('seals every response and input for its record (format 2), an unknown one for no record', () => {
    expect(sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD).body[0]).toBe(2);
    const orphan = sealing.sealResponse('alice', 'key-1', RESPONSE, undefined);
    expect(orphan.body[0]).toBe(2);
    unreadable(() => sealing.openResponse('alice', 'key-1', orphan, 'r', ...AT));
    const input = sealing.sealValue('input', 'alice', 'key-1', { amount: 5 }, RECORD.recordId);
    expect(sealing.openValue('input', 'alice', 'key-1', input, 'r', RECORD.recordId)).toEqual({
      amount: 5,
    });
    // An input copied from an earlier record of the key (another record id) does not open.
    unreadable(() => sealing.openValue('input', 'alice', 'key-1', input, 'r', 'earlier-record'));
  });

  it('refuses a state opened at another recovery point than it was stored with', () => {
    const state = sealing.sealValue('state', 'alice', 'key-1', { ledgerId: 3 }, 'reserved');
    expect(sealing.openValue('state', 'alice', 'key-1', state, 'r', 'reserved')).toEqual({
      ledgerId: 3,
    });
    unreadable(() => sealing.openValue('state', 'alice', 'key-1', state, 'r', 'charged'));
  });

  it('refuses a plaintextUntil that is not a date', () => {
    for (const bad of ['tomorrow', '2026-03-01', 42, new Date('nope')]) {
      expect(() =>
        resolveEncryptionOptions({ keys: [{ id: 'k1', secret: OLD }], plaintextUntil: bad }),
      ).toThrow(/encryption\.plaintextUntil/);
    }
  });

  it('rotation: a record sealed with the old key opens once a new key seals first', () => {
    const sealedOld = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    const rotated = sealer({ id: 'k2', secret: NEW }, { id: 'k1', secret: OLD });
    expect(
      rotated.openResponse('alice', 'key-1', sealedOld, 'r', ...AT).body.equals(RESPONSE.body),
    ).toBe(true);
    const sealedNew = rotated.sealResponse('alice', 'key-2', RESPONSE, RECORD);
    expect(sealedNew.headers).toEqual({ [SEALED_MARKER]: 'k2' });
    expect(
      unreadable(() => sealing.openResponse('alice', 'key-2', sealedNew, 'r', ...AT)).code,
    ).toBe('idempotency_record_unreadable');
  });

  it('answers unreadable for a key id that is not configured, logging the id and never a secret', () => {
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    const newOnly = sealer({ id: 'k2', secret: NEW });
    const error = unreadable(() =>
      newOnly.openResponse('alice', 'key-1', sealed, 'The record 42', ...AT),
    );
    expect(error.code).toBe('idempotency_record_unreadable');
    expect(error.message).toContain('encryption key "k1", which is not in encryption.keys');
    expect(logged).toEqual([error.message]);
    expect(error.detail).not.toContain('k1');
    for (const text of [...logged, error.detail]) {
      expect(text).not.toContain(OLD);
      expect(text).not.toContain(NEW.toString('base64'));
      expect(text).not.toContain('key-1');
      expect(text).not.toContain('alice');
    }
  });

  it('with encryption off, stores in the clear and refuses a sealed record instead of replaying ciphertext', () => {
    const off = new RecordSealer(null);
    expect(off.seals).toBe(false);
    expect(off.sealResponse('a', 'k', RESPONSE, RECORD)).toBe(RESPONSE);
    const state = { x: 1 };
    expect(off.sealValue('state', 'a', 'k', state)).toBe(state);
    const sealed = sealing.sealResponse('alice', 'key-1', RESPONSE, RECORD);
    const error = unreadable(() =>
      off.openResponse('alice', 'key-1', sealed, 'The record 1', ...AT),
    );
    expect(error.message).toContain('"k1", which is not configured (encryption is off)');
  });
});

describe('the encryption option', () => {
  function refused(encryption: unknown): string {
    try {
      resolveIdempotencyOptions({ encryption: encryption as never });
    } catch (error) {
      expect(error).toBeInstanceOf(IdempotencyConfigurationError);
      return (error as Error).message;
    }
    throw new Error('expected the option to be refused');
  }

  it('is off by default (null), and null or undefined keep it off', () => {
    expect(resolveIdempotencyOptions().encryption).toBeNull();
    expect(resolveIdempotencyOptions({ encryption: null }).encryption).toBeNull();
    expect(resolveIdempotencyOptions({ encryption: undefined }).encryption).toBeNull();
  });

  it('takes a Buffer, a Uint8Array or base64 text of 32 bytes (a trailing newline ignored)', () => {
    const bytes = randomBytes(32);
    const { encryption } = resolveIdempotencyOptions({
      encryption: {
        keys: [
          { id: '2026-01', secret: `${bytes.toString('base64')}\n` },
          { id: '2025-12', secret: new Uint8Array(randomBytes(32)) },
          { id: 'old_key.v1~x', secret: randomBytes(32) },
        ],
      },
    });
    expect(encryption!.keys.map((key) => key.id)).toEqual(['2026-01', '2025-12', 'old_key.v1~x']);
    expect(encryption!.keys[0].secret.export().equals(bytes)).toBe(true);
    // Held as KeyObjects: printing or serialising the options shows no key material.
    expect(JSON.stringify(encryption)).not.toContain(bytes.toString('base64'));
    expect(inspect(encryption, { depth: 5 })).not.toContain(bytes.toString('hex').slice(0, 16));
  });

  it.each([
    ['no keys', { keys: [] }, /option "encryption" is invalid.*openssl rand -base64 32/s],
    ['keys not an array', { keys: OLD }, /option "encryption" is invalid \(got "{ keys: a base64/],
    ['a string', OLD, /option "encryption" is invalid \(got "a base64 string of 32 bytes"\)/],
    ['an empty id', { keys: [{ id: '', secret: OLD }] }, /encryption.keys\[0\].id.*1 to 64/s],
    ['an id with a space', { keys: [{ id: 'a b', secret: OLD }] }, /encryption.keys\[0\].id/],
    ['a numeric id', { keys: [{ id: 1, secret: OLD }] }, /encryption.keys\[0\].id/],
    ['an id of 65 characters', { keys: [{ id: 'a'.repeat(65), secret: OLD }] }, /\.id/],
    [
      'two keys with one id',
      {
        keys: [
          { id: 'k', secret: OLD },
          { id: 'k', secret: NEW },
        ],
      },
      /encryption.keys\[1\].id.*own id/s,
    ],
  ])('refuses %s', (_, encryption, message) => {
    const text = refused(encryption);
    expect(text).toMatch(message);
    expect(text).not.toContain(OLD);
  });

  it.each([
    ['a 32-character passphrase', 'correcthorsebatterystaple0123456', /base64 string of 24 bytes/],
    ['base64 of 16 bytes', randomBytes(16).toString('base64'), /base64 string of 16 bytes/],
    ['base64 of 33 bytes', randomBytes(33).toString('base64'), /base64 string of 33 bytes/],
    ['hex of 32 bytes', randomBytes(32).toString('hex'), /base64 string of 48 bytes/],
    ['text that is not base64', 'not base64 at all?', /string of 18 characters that is not base64/],
    ['a Buffer of 31 bytes', randomBytes(31), /Buffer of 31 bytes/],
    ['a number', 42, /a number/],
    ['missing', undefined, /got "no secret"/],
    ['an object', { key: 'x' }, /got "an object"/],
  ])('refuses a secret that is %s, saying what it was and never echoing it', (_, secret, shown) => {
    const message = refused({ keys: [{ id: 'k1', secret }] });
    expect(message).toMatch(/encryption\.keys\[0\]\.secret \(key "k1"\)/);
    expect(message).toMatch(shown);
    expect(message).toContain('openssl rand -base64 32');
    if (typeof secret === 'string') expect(message).not.toContain(secret);
    if (Buffer.isBuffer(secret)) expect(message).not.toContain(secret.toString('base64'));
  });
});
