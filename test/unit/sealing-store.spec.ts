/**
 * The local-first store sealing at its edge (encryption at rest) passes the store conformance
 * suite over the memory store, with its replay cache off and on; the store below it
 * holds only sealed responses (plain and transactional completions), the layers above and the
 * replay cache only plaintext; records stored in the clear still replay; a record whose key is
 * gone fails its claim with `idempotency_record_unreadable` on every retry.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { IdempotencyProblemException } from '../../lib/errors/idempotency-problem.exception';
import { MemoryIdempotencyStore } from '../../lib/storage/memory-idempotency.store';
import type {
  ClaimRequest,
  ClaimResult,
  StoredResponse,
} from '../../lib/interfaces/idempotency-record.interface';
import type { IdempotencyStore } from '../../lib/storage/idempotency.store';
import { LocalFirstIdempotencyStore } from '../../lib/storage/local-first-idempotency.store';
import { resolveEncryptionOptions } from '../../lib/config/encryption-options';
import { RecordSealer, SEALED_MARKER } from '../../lib/storage/sealed/record-sealer';
import { describeIdempotencyStoreConformance } from '../../lib/testing';

const K1 = { id: 'k1', secret: randomBytes(32) };
const K2 = { id: 'k2', secret: randomBytes(32) };

function sealerOf(...keys: Array<{ id: string; secret: Buffer }>): RecordSealer {
  return new RecordSealer(resolveEncryptionOptions(keys.length ? { keys } : null));
}

/** An instance's store sealing over `inner`, its replay cache off: every claim reads `inner`. */
function sealingOver(inner: IdempotencyStore, sealer: RecordSealer, now?: () => number) {
  return new LocalFirstIdempotencyStore(inner, { maxEntries: 0, maxBytes: 0, sealer }, now);
}

function clock() {
  let now = Date.parse('2026-01-01T00:00:00Z');
  return {
    now: () => now,
    advance: (seconds: number) => {
      now += seconds * 1000;
    },
  };
}

describeIdempotencyStoreConformance(
  'LocalFirstIdempotencyStore sealing over MemoryIdempotencyStore, replay cache off',
  () => {
    const time = clock();
    return {
      store: sealingOver(new MemoryIdempotencyStore(time.now), sealerOf(K2, K1), time.now),
      advance: time.advance,
    };
  },
  { describe, it, expect },
);

describeIdempotencyStoreConformance(
  'LocalFirstIdempotencyStore sealing over MemoryIdempotencyStore, replay cache on',
  () => {
    const time = clock();
    return {
      store: new LocalFirstIdempotencyStore(
        new MemoryIdempotencyStore(time.now),
        { maxEntries: 100, maxBytes: 1 << 20, sealer: sealerOf(K1) },
        time.now,
      ),
      advance: time.advance,
    };
  },
  { describe, it, expect },
);

const RESPONSE: StoredResponse = {
  status: 201,
  headers: { 'content-type': 'application/json', location: '/cards/1' },
  body: Buffer.from('{"card":"4242424242424242"}'),
};

function claimRequest(key = `key-${randomUUID()}`): ClaimRequest {
  return {
    scope: 'alice',
    key,
    fingerprint: 'a'.repeat(64),
    method: 'POST',
    path: '/cards',
    ownerToken: randomUUID(),
    lockTimeoutSeconds: 60,
    ttlSeconds: 3600,
  };
}

/** Claims and completes a record through `store`. */
async function completed(
  store: IdempotencyStore,
  response = RESPONSE,
  transactional = false,
): Promise<ClaimRequest> {
  const request = claimRequest();
  expect((await store.claim(request)).outcome).toBe('claimed');
  const ref = { scope: request.scope, key: request.key, ownerToken: request.ownerToken };
  if (transactional) {
    const transaction = await store.beginTransaction();
    expect(await transaction.complete(ref, response, 3600)).toBe(true);
    await transaction.commit();
  } else {
    expect(await store.complete(ref, response, 3600)).toBe(true);
  }
  return request;
}

function replayOf(result: ClaimResult): StoredResponse {
  if (result.outcome !== 'completed') throw new Error(`expected a replay, got ${result.outcome}`);
  return result.response;
}

const again = (request: ClaimRequest) => ({ ...request, ownerToken: randomUUID() });

describe("sealing at the local-first store's edge", () => {
  beforeEach(() => jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined));
  afterEach(() => jest.restoreAllMocks());

  it.each([
    ['complete()', false],
    ['a transaction', true],
  ])(
    'stores only sealed bytes below it when completed by %s, and replays plaintext',
    async (_, tx) => {
      const memory = new MemoryIdempotencyStore();
      const store = sealingOver(memory, sealerOf(K1));
      const request = await completed(store, RESPONSE, tx);
      const below = replayOf(await memory.claim(again(request)));
      expect(below.status).toBe(201);
      expect(below.headers).toEqual({ [SEALED_MARKER]: 'k1' });
      expect(below.body.includes('4242')).toBe(false);
      const replay = replayOf(await store.claim(again(request)));
      expect(replay.headers).toEqual(RESPONSE.headers);
      expect(replay.body.equals(RESPONSE.body)).toBe(true);
    },
  );

  it('replays a record stored in the clear before encryption only until plaintextUntil', async () => {
    const memory = new MemoryIdempotencyStore();
    const before = await completed(memory);
    const until = new Date(Date.now() + 60_000);
    const reading = new RecordSealer(
      resolveEncryptionOptions({ keys: [K1], plaintextUntil: until }),
    );
    const replay = replayOf(await sealingOver(memory, reading).claim(again(before)));
    expect(replay).toEqual(RESPONSE);
    const strict = sealingOver(memory, sealerOf(K1));
    await expect(strict.claim(again(before))).rejects.toMatchObject({
      code: 'idempotency_record_unreadable',
    });
  });

  it('opens a record sealed with an older key once a new key seals first', async () => {
    const memory = new MemoryIdempotencyStore();
    const old = await completed(sealingOver(memory, sealerOf(K1)));
    const rotated = sealingOver(memory, sealerOf(K2, K1));
    expect(replayOf(await rotated.claim(again(old))).body.equals(RESPONSE.body)).toBe(true);
    const fresh = await completed(rotated);
    expect(replayOf(await memory.claim(again(fresh))).headers).toEqual({ [SEALED_MARKER]: 'k2' });
  });

  it('fails every claim of a record whose key is gone with idempotency_record_unreadable', async () => {
    const memory = new MemoryIdempotencyStore();
    const old = await completed(sealingOver(memory, sealerOf(K1)));
    for (const sealer of [sealerOf(K2), sealerOf()]) {
      const store = sealingOver(memory, sealer);
      for (let retry = 0; retry < 2; retry++) {
        const error = await store.claim(again(old)).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(IdempotencyProblemException);
        expect((error as IdempotencyProblemException).code).toBe('idempotency_record_unreadable');
      }
    }
    // The record itself is untouched: with the key back, it replays.
    const back = sealingOver(memory, sealerOf(K2, K1));
    expect(replayOf(await back.claim(again(old))).body.equals(RESPONSE.body)).toBe(true);
  });

  it('seals a completion for the record and fingerprint of the claim it won (format 2); one of a run it does not know, for no record', async () => {
    const memory = new MemoryIdempotencyStore();
    const store = sealingOver(memory, sealerOf(K1));
    const won = await completed(store);
    expect(replayOf(await memory.claim(again(won))).body[0]).toBe(2);
    expect(replayOf(await store.claim(again(won)))).toEqual(RESPONSE);
    // A run this instance does not know (a claim made below it; a lost lease is forgotten too):
    // its answer opens for no claim, rather than for any record of the key.
    const elsewhere = claimRequest();
    expect((await memory.claim(elsewhere)).outcome).toBe('claimed');
    const ref = { scope: elsewhere.scope, key: elsewhere.key, ownerToken: elsewhere.ownerToken };
    expect(await store.complete(ref, RESPONSE, 3600)).toBe(true);
    expect(replayOf(await memory.claim(again(elsewhere))).body[0]).toBe(2);
    const error = await store.claim(again(elsewhere)).catch((e: unknown) => e);
    expect((error as IdempotencyProblemException).code).toBe('idempotency_record_unreadable');
  });

  it('under the local-first store, the replay cache holds and serves plaintext', async () => {
    const memory = new MemoryIdempotencyStore();
    const local = new LocalFirstIdempotencyStore(sealingOver(memory, sealerOf(K1)), {
      maxEntries: 10,
      maxBytes: 1 << 20,
    });
    const request = await completed(local);
    const spy = jest.spyOn(memory, 'claim');
    const cached = replayOf(await local.claim(again(request)));
    expect(spy).not.toHaveBeenCalled();
    expect(cached).toEqual(RESPONSE);
  });
});
