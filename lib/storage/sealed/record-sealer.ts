import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { IdempotencyProblemException } from '../../errors/idempotency-problem.exception';
import { RESERVED_HEADER_PREFIX } from '../../config/idempotency.constants';
import type { StoredResponse } from '../../interfaces/idempotency-record.interface';
import type { ResolvedIdempotencyEncryption } from '../../config/encryption-options';

/**
 * The stored-header entry that marks a sealed response, with the id of the key that sealed it;
 * also the member that marks a sealed operation input or state. Reserved: never replayed.
 */
export const SEALED_MARKER = `${RESERVED_HEADER_PREFIX}sealed`;

/** What a sealed blob holds; bound into its authentication, so one cannot stand for another. */
export type SealedPart = 'response' | 'input' | 'state';

/** The record a response answers, bound into its seal: its id and its request's fingerprint. */
export interface SealedRecord {
  readonly recordId: string;
  readonly fingerprint: string;
}

/**
 * First byte of every sealed blob: what its authentication covers besides its part, key id,
 * scope and key. `BOUND` covers the record (a response: its id and fingerprint; an input: its
 * id; a state: its recovery point); `UNBOUND` is a response sealed by builds that did not know
 * the record on the completer's and an operator's paths; `LEGACY` is what builds before `BOUND`
 * sealed. Only `BOUND` is written.
 */
const LEGACY = 1;
const BOUND = 2;
const UNBOUND = 3;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEAD_BYTES = 1 + IV_BYTES + TAG_BYTES;

/**
 * The entry of a sealed response's headers (inside the seal) that holds its status, so that the
 * status in the row's clear column is checked against it. Reserved: never replayed.
 */
export const SEALED_STATUS = `${RESERVED_HEADER_PREFIX}status`;

/**
 * Seals and opens what a record keeps of a request with AES-256-GCM (`node:crypto`).
 *
 * A sealed blob is `format (1 byte) | IV (12 random bytes) | GCM tag (16 bytes) | ciphertext`.
 * Its additional authenticated data is the JSON array
 * `["nest-idempotency", format, part, keyId, scope, key, ...bound]` (`bound` in format 2 only),
 * so a blob opens only as the same part of a record with the same scope and key, under the key
 * id it names, and (format 2) only for what it was bound to: a response for the record id and
 * the request fingerprint it answered, an input for its record id, a state at the recovery point
 * it was stored with. Moved to another record (an earlier one of the same key included),
 * relabelled, or with its recovery point moved, it fails to open. Formats 1 (what builds before
 * format 2 sealed) and 3 (a response earlier builds sealed on the completer's and an operator's
 * paths), bound to their scope and key only, are opened only while `encryption.plaintextUntil`
 * lets records from before be read: the format is the row's word, so it cannot decide alone.
 *
 * - A response's headers and body are sealed together (the plaintext is `uint32 BE length of
 *   the headers' JSON | that JSON | the body`), its status among the headers as
 *   `x-nest-idempotency-status`; the status is also kept in the clear, for the store, and must
 *   match. The sealed response's headers are one entry, `x-nest-idempotency-sealed: <key id>`,
 *   and its body is the blob. A format 1 blob sealed before the status was sealed with it
 *   (without that entry) opens, while format 1 may be read, with the row's status.
 * - An operation's input or state (JSON) becomes `{ "x-nest-idempotency-sealed": <key id>,
 *   "sealed": <the blob in base64> }`.
 *
 * The first key seals, every key opens. With encryption on, whether a record must be sealed is
 * decided by the configuration, never by the row: a record without a seal is read only until
 * `encryption.plaintextUntil` (records stored before encryption was turned on), and the empty
 * state the store gives an operation at its start. A sealed part whose key is not configured,
 * that does not open, or whose row was changed beside it, and an unsealed one that may not be
 * read, is logged (naming the key id, never a secret or the Idempotency-Key) and answered with
 * 500 `idempotency_record_unreadable`.
 */
export class RecordSealer {
  private readonly logger = new Logger('Idempotency');
  private readonly secrets = new Map<string, KeyObject>();
  private readonly sealing?: { readonly id: string; readonly secret: KeyObject };
  private readonly plaintextUntil: number | null;
  /** Random IVs drawn ahead (see `nextIv`), and how many of their bytes were handed out. */
  private ivs = Buffer.alloc(0);
  private ivsUsed = 0;

  /** @param encryption - the resolved `encryption` option; `null` seals nothing */
  constructor(encryption: ResolvedIdempotencyEncryption | null) {
    for (const { id, secret } of encryption?.keys ?? []) this.secrets.set(id, secret);
    this.sealing = encryption?.keys[0];
    this.plaintextUntil = encryption?.plaintextUntil ?? null;
  }

  /** Whether new records are sealed (encryption is on). */
  get seals(): boolean {
    return this.sealing !== undefined;
  }

  /**
   * The response as it is to be stored: sealed when encryption is on.
   * @param record - the record it answers, bound into the seal; unknown (a run this instance
   *   no longer knows: its lease was lost), the seal binds no record and opens for no claim
   */
  sealResponse(
    scope: string,
    key: string,
    response: StoredResponse,
    record: SealedRecord | undefined,
  ): StoredResponse {
    const sealing = this.sealing;
    if (!sealing) return response;
    const sealedHeaders = { ...response.headers, [SEALED_STATUS]: String(response.status) };
    const headers = Buffer.from(JSON.stringify(sealedHeaders), 'utf8');
    const length = Buffer.allocUnsafe(4);
    length.writeUInt32BE(headers.length);
    const plain = [length, headers, response.body];
    const bound = [record?.recordId ?? '', record?.fingerprint ?? ''];
    const blob = this.seal(sealing, 'response', scope, key, plain, ...bound);
    return { status: response.status, headers: { [SEALED_MARKER]: sealing.id }, body: blob };
  }

  /**
   * The response as stored before it was sealed; one stored in the clear as it is, when it may
   * be read so (see `readsClear`).
   * @param what - names the record in the log, e.g. `record 42` (never its key)
   * @param recordId - the record the claim found
   * @param fingerprint - the fingerprint it matched
   * @throws IdempotencyProblemException `idempotency_record_unreadable`
   */
  openResponse(
    scope: string,
    key: string,
    response: StoredResponse,
    what: string,
    recordId: string,
    fingerprint: string,
  ): StoredResponse {
    const id = response.headers[SEALED_MARKER];
    if (id === undefined) {
      this.readsClear(what);
      return response;
    }
    if (typeof id !== 'string' || Object.keys(response.headers).length !== 1) {
      throw this.unreadable(`${what} has stored headers beside its seal: ${CHANGED}`);
    }
    const body = response.body;
    const plain = this.open('response', scope, key, id, body, what, recordId, fingerprint);
    const length = plain.length >= 4 ? plain.readUInt32BE(0) : Infinity;
    if (4 + length > plain.length) {
      throw this.unreadable(`${what} holds a sealed response in a shape this version cannot read.`);
    }
    // A fresh object without the status entry (no `delete`, which would slow the headers down).
    const { [SEALED_STATUS]: status, ...headers } = JSON.parse(
      plain.subarray(4, 4 + length).toString('utf8'),
    ) as StoredResponse['headers'];
    if (status !== undefined && status !== String(response.status)) {
      throw this.unreadable(
        `${what} has the status ${response.status} in its row but ${String(status)} under its ` +
          `seal: ${CHANGED}`,
      );
    }
    return { status: response.status, headers, body: plain.subarray(4 + length) };
  }

  /**
   * An operation's input or state as it is to be stored: sealed when encryption is on.
   * @param bound - bound into its seal: an input's record id (unknown, `''`: as for a response),
   *   a state's recovery point
   */
  sealValue<T>(part: 'input' | 'state', scope: string, key: string, value: T, bound?: string): T {
    const sealing = this.sealing;
    if (!sealing) return value;
    const plain = Buffer.from(JSON.stringify(value ?? null), 'utf8');
    const blob = this.seal(sealing, part, scope, key, [plain], ...boundOf(part, bound));
    return { [SEALED_MARKER]: sealing.id, sealed: blob.toString('base64') } as T;
  }

  /**
   * An operation's input or state as it was before it was sealed; one stored in the clear as it
   * is, when it may be read so (see `readsClear`), and the empty state the store gives an
   * operation that has not advanced yet (`started`) always.
   * @param what - names the record in the log (never its key)
   * @param bound - what its seal must be bound to: the record's id (an input), the recovery point
   *   the record holds (a state)
   * @throws IdempotencyProblemException `idempotency_record_unreadable`
   */
  openValue<T>(
    part: 'input' | 'state',
    scope: string,
    key: string,
    value: T,
    what: string,
    bound?: string | null,
  ): T {
    if (!isSealedValue(value)) {
      if (part !== 'state' || bound !== 'started' || membersOf(value) !== 0) this.readsClear(what);
      return value;
    }
    const blob = Buffer.from(value.sealed, 'base64');
    const id = value[SEALED_MARKER];
    const plain = this.open(part, scope, key, id, blob, what, ...boundOf(part, bound));
    return JSON.parse(plain.toString('utf8')) as T;
  }

  private seal(
    sealing: { readonly id: string; readonly secret: KeyObject },
    part: SealedPart,
    scope: string,
    key: string,
    plain: Buffer[],
    ...bound: string[]
  ): Buffer {
    const iv = this.nextIv();
    const cipher = createCipheriv('aes-256-gcm', sealing.secret, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(additionalData(BOUND, part, sealing.id, scope, key, bound));
    // One update over the whole plaintext, written once into the blob: every call into the
    // cipher and every intermediate buffer costs more than AES-GCM does on a small body.
    const sealed = cipher.update(plain.length === 1 ? plain[0] : Buffer.concat(plain));
    const rest = cipher.final();
    const blob = Buffer.allocUnsafe(HEAD_BYTES + sealed.length + rest.length);
    blob[0] = BOUND;
    iv.copy(blob, 1);
    cipher.getAuthTag().copy(blob, 1 + IV_BYTES);
    sealed.copy(blob, HEAD_BYTES);
    rest.copy(blob, HEAD_BYTES + sealed.length);
    return blob;
  }

  /**
   * A random 96-bit IV (GCM's own size), drawn from `randomBytes` many at a time: the same source
   * and the same randomness per IV as one `randomBytes(12)` per seal, for one call in 128. Every
   * IV is a fresh slice, never handed out twice.
   */
  private nextIv(): Buffer {
    if (this.ivsUsed + IV_BYTES > this.ivs.length) {
      this.ivs = randomBytes(IV_BYTES * IVS_PER_FILL);
      this.ivsUsed = 0;
    }
    return this.ivs.subarray(this.ivsUsed, (this.ivsUsed += IV_BYTES));
  }

  /**
   * The plaintext of a blob, with what a format 2 blob must be bound to.
   * @throws IdempotencyProblemException `idempotency_record_unreadable`
   */
  private open(
    part: SealedPart,
    scope: string,
    key: string,
    id: string,
    blob: Buffer,
    what: string,
    ...bound: string[]
  ): Buffer {
    const secret = this.secrets.get(id);
    if (!secret) {
      throw this.unreadable(
        `${what} is sealed with encryption key "${id}", which ` +
          (this.seals ? 'is not in encryption.keys' : 'is not configured (encryption is off)') +
          `. Add the key with id "${id}" back to encryption.keys (after the first) to read it.`,
      );
    }
    const format = blob.length >= HEAD_BYTES ? blob[0] : 0;
    const opened =
      (format === BOUND || format === LEGACY || (format === UNBOUND && part === 'response')) &&
      decrypt(secret, blob, additionalData(format, part, id, scope, key, bound));
    if (!opened) {
      throw this.unreadable(
        `${what} could not be opened with encryption key "${id}": the stored bytes were ` +
          'changed or moved from another record (an earlier one of the same key included), its ' +
          'recovery point was moved, or the secret configured under that id is not the one ' +
          'that sealed them.',
      );
    }
    // Authentic, but bound to no record: read only while records from before may be.
    if (format !== BOUND) this.readsLegacy(what);
    return opened;
  }

  /**
   * Refuses a record stored in the clear while encryption is on, unless `plaintextUntil` (the
   * operator's word, by this instance's clock) still lets records from before encryption be
   * read: nothing in a row can vouch for it, since whoever could strip a seal could forge that.
   */
  private readsClear(what: string): void {
    if (!this.seals || this.readsBefore()) return;
    const until = this.plaintextUntil;
    throw this.unreadable(
      `${what} is stored in the clear, but encryption is on and ` +
        (until === null
          ? 'encryption.plaintextUntil is not set'
          : `encryption.plaintextUntil (${new Date(until).toISOString()}) has passed`) +
        ': it was written before encryption was turned on, or its seal was removed outside ' +
        'the library. To read records from before encryption, set encryption.plaintextUntil.',
    );
  }

  /**
   * Refuses a blob in a format that does not bind its record (format 1, or a format 3 response
   * of the completer or an operator), which a row edit could move from an earlier record of the
   * key, unless `plaintextUntil` still lets records from before be read. The format byte is the
   * row's word: it never decides alone.
   */
  private readsLegacy(what: string): void {
    if (this.readsBefore()) return;
    throw this.unreadable(
      `${what} is sealed in a format of a build before the record it answers was bound into ` +
        'its seal, and encryption.plaintextUntil ' +
        (this.plaintextUntil === null ? 'is not set' : 'has passed') +
        ': it was written before the upgrade, or moved there from an earlier record outside the ' +
        'library. To read records sealed before the upgrade, set encryption.plaintextUntil.',
    );
  }

  /** Whether records from before (in the clear, or legacy seals) may still be read. */
  private readsBefore(): boolean {
    const until = this.plaintextUntil;
    return until !== null && Date.now() < until;
  }

  private unreadable(problem: string): IdempotencyProblemException {
    const message =
      `nest-idempotency: ${problem} Until then it is neither replayed nor resumed, and requests ` +
      'with its key get 500 idempotency_record_unreadable.';
    this.logger.error(message);
    return IdempotencyProblemException.recordUnreadable(message);
  }
}

/** How many IVs one call to the random source fills. */
const IVS_PER_FILL = 128;

const CHANGED = 'the row was changed outside the library.';

/** How many members a stored value has when it is a JSON object (not an array, not null). */
function membersOf(value: unknown): number | undefined {
  const object = typeof value === 'object' && value !== null && !Array.isArray(value);
  return object ? Object.keys(value).length : undefined;
}

/** Whether a stored input or state is a sealed one. */
function isSealedValue(value: unknown): value is { [SEALED_MARKER]: string; sealed: string } {
  const sealed = value as Record<string, unknown>;
  if (membersOf(value) !== 2) return false;
  return typeof sealed[SEALED_MARKER] === 'string' && typeof sealed.sealed === 'string';
}

/** What a value's seal binds: an input its record id, a state its recovery point. */
function boundOf(part: 'input' | 'state', bound: string | null | undefined): string[] {
  return [part === 'state' ? String(bound) : (bound ?? '')];
}

function additionalData(
  format: number,
  part: SealedPart,
  id: string,
  scope: string,
  key: string,
  bound: string[],
): Buffer {
  const data: Array<string | number> = ['nest-idempotency', format, part, id, scope, key];
  // What a format 2 blob is bound to: a response's record id and fingerprint, an input's record
  // id, a state's recovery point.
  if (format === BOUND) data.push(...bound);
  return Buffer.from(JSON.stringify(data), 'utf8');
}

/** The plaintext of a blob, or undefined when it does not authenticate. */
function decrypt(secret: KeyObject, blob: Buffer, aad: Buffer): Buffer | undefined {
  try {
    const iv = blob.subarray(1, 1 + IV_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', secret, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(blob.subarray(1 + IV_BYTES, HEAD_BYTES));
    const plain = decipher.update(blob.subarray(HEAD_BYTES));
    return Buffer.concat([plain, decipher.final()]);
  } catch {
    return undefined;
  }
}
