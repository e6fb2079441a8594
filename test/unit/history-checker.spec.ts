import { checkHistory } from '../chaos/history/check-history';
import type { AnswerEvent, HistoryEvent } from '../chaos/history/history-event';

const BOUND = { settleBoundMs: 1_000 };

function answer(at: number, fields: Partial<AnswerEvent> = {}): AnswerEvent {
  return {
    type: 'answer',
    key: 'k1',
    client: 'c1',
    startedAt: at - 50,
    at,
    requestHash: 'body-a',
    status: 201,
    replayed: false,
    answerHash: 'answer-1',
    ...fields,
  };
}

/** One key charged once and replayed twice, one job staged, delivered twice and applied once. */
function cleanHistory(): HistoryEvent[] {
  return [
    { type: 'handler-start', key: 'k1', run: 'r1', instance: 'a', requestHash: 'body-a', at: 10 },
    { type: 'provider-charge', derivedKey: 'k1/charge', created: true, at: 20 },
    answer(25, {
      client: 'c2',
      status: 409,
      code: 'idempotency_key_in_use',
      retryAfter: '1',
      answerHash: 'x',
    }),
    { type: 'effect', key: 'k1', at: 30 },
    { type: 'handler-end', run: 'r1', at: 40 },
    answer(50),
    { type: 'provider-charge', derivedKey: 'k1/charge', created: false, at: 60 },
    answer(70, { replayed: true }),
    answer(80, { requestHash: 'body-b', status: 422, code: 'idempotency_key_reused' }),
    { type: 'job-staged', job: 'j1', at: 40 },
    { type: 'job-delivery', job: 'j1', at: 90 },
    { type: 'job-delivery', job: 'j1', at: 95 },
    { type: 'job-effect', job: 'j1', at: 96 },
  ];
}

function rulesOf(history: HistoryEvent[]): string[] {
  return checkHistory(history, BOUND).map((violation) => `${violation.rule}: ${violation.message}`);
}

describe('the history checker', () => {
  it('finds nothing wrong in a history that keeps every promise', () => {
    expect(rulesOf(cleanHistory())).toEqual([]);
  });

  it('finds a second charge for one derived key', () => {
    const history = [
      ...cleanHistory(),
      { type: 'provider-charge', derivedKey: 'k1/charge', created: true, at: 61 } as const,
    ];
    expect(rulesOf(history)).toEqual(['one-effect: 2 provider charges under one derived key']);
  });

  it('finds two charges for one request under two derived keys', () => {
    const history: HistoryEvent[] = [
      ...cleanHistory(),
      { type: 'provider-charge', derivedKey: 'lost/charge', key: 'k5', created: true, at: 1 },
      { type: 'provider-charge', derivedKey: 'anew/charge', key: 'k5', created: true, at: 2 },
      answer(3, { key: 'k5' }),
    ];
    expect(rulesOf(history)).toEqual(['one-effect: 2 provider charges under one request key']);
  });

  it('finds a local effect applied twice', () => {
    const history = [...cleanHistory(), { type: 'effect', key: 'k1', at: 65 } as const];
    expect(rulesOf(history)).toEqual(['one-effect: 2 effects under one key']);
  });

  it('finds a replay that differs from the first final answer', () => {
    const history = [...cleanHistory(), answer(75, { replayed: true, answerHash: 'answer-2' })];
    expect(rulesOf(history)).toEqual([
      'replay-equal: answer 201 differs from the first final answer',
    ]);
  });

  it('finds a 422 for the same body after a final answer, but not one begun before it', () => {
    const reused = { status: 422, code: 'idempotency_key_reused', answerHash: 'p' } as const;
    const before = [...cleanHistory(), answer(52, { ...reused, startedAt: 45 })];
    expect(rulesOf(before)).toEqual([]);
    const after = [...cleanHistory(), answer(85, { ...reused, startedAt: 80 })];
    expect(rulesOf(after)).toEqual([
      'no-contradiction: the same body got 422 although a final answer was stored',
    ]);
  });

  it('finds a handler that ran again after a final answer, naming the body it ran with', () => {
    const again = (requestHash: string): HistoryEvent[] => [
      ...cleanHistory(),
      { type: 'handler-start', key: 'k1', run: 'r2', instance: 'b', requestHash, at: 100 },
      { type: 'handler-end', run: 'r2', at: 110 },
    ];
    expect(rulesOf(again('body-a'))).toEqual([
      'no-contradiction: the handler ran again with the same body after a final answer was seen',
    ]);
    expect(rulesOf(again('body-b'))).toEqual([
      'no-contradiction: the handler ran again with another body after a final answer was seen',
    ]);
  });

  it("excuses a late run only when the library found that run's lease taken over", () => {
    const late = (lost: HistoryEvent[]): HistoryEvent[] => [
      ...cleanHistory(),
      {
        type: 'handler-start',
        key: 'k1',
        run: 'r2',
        instance: 'b',
        requestHash: 'body-a',
        at: 100,
      },
      ...lost,
      { type: 'handler-end', run: 'r2', at: 120 },
    ];
    expect(rulesOf(late([{ type: 'lock-lost', key: 'k1', instance: 'b', at: 110 }]))).toEqual([]);
    const stillViolations = [
      // another instance's lost lease, another key's, or one lost before this run began
      { type: 'lock-lost', key: 'k1', instance: 'a', at: 110 },
      { type: 'lock-lost', key: 'k2', instance: 'b', at: 110 },
      { type: 'lock-lost', key: 'k1', instance: 'b', at: 90 },
    ] as const;
    for (const lost of stillViolations) {
      expect(rulesOf(late([lost]))).toEqual([
        'no-contradiction: the handler ran again with the same body after a final answer was seen',
      ]);
    }
  });

  it('finds a key refused as outstanding past the bound after its owner was killed', () => {
    const inUse = {
      status: 409,
      code: 'idempotency_key_in_use',
      retryAfter: '1',
      answerHash: 'x',
    } as const;
    const history: HistoryEvent[] = [
      { type: 'handler-start', key: 'k2', run: 'r3', instance: 'a', requestHash: 'b', at: 0 },
      { type: 'kill', instance: 'a', at: 100 },
      answer(900, { key: 'k2', ...inUse, startedAt: 800 }),
      answer(1_300, { key: 'k2', ...inUse, startedAt: 1_200 }),
      { type: 'handler-start', key: 'k2', run: 'r4', instance: 'b', requestHash: 'b', at: 1_400 },
      { type: 'handler-end', run: 'r4', at: 1_450 },
      answer(1_500, { key: 'k2', requestHash: 'b' }),
    ];
    expect(rulesOf(history)).toEqual([
      'settles: refused as outstanding 1100 ms after its last handler stopped',
    ]);
  });

  it('does not blame a wait on a handler that is still running', () => {
    const history: HistoryEvent[] = [
      { type: 'handler-start', key: 'k3', run: 'r5', instance: 'a', requestHash: 'b', at: 0 },
      answer(5_000, {
        key: 'k3',
        status: 409,
        code: 'idempotency_key_in_use',
        retryAfter: '1',
        startedAt: 4_900,
      }),
      { type: 'handler-end', run: 'r5', at: 6_000 },
      answer(6_100, { key: 'k3', requestHash: 'b' }),
    ];
    expect(rulesOf(history)).toEqual([]);
  });

  it('finds a key no client ever saw a final answer for', () => {
    const history = [
      ...cleanHistory(),
      answer(200, {
        key: 'k4',
        status: 503,
        code: 'idempotency_store_unavailable',
        retryAfter: '1',
      }),
    ];
    expect(rulesOf(history)).toEqual(['settles: no client ever saw a final answer']);
  });

  it('finds a staged job never delivered, and one whose effect was applied twice', () => {
    const lost = [...cleanHistory(), { type: 'job-staged', job: 'j2', at: 41 } as const];
    expect(rulesOf(lost)).toEqual(['jobs: a staged job was never delivered']);
    const twice = [...cleanHistory(), { type: 'job-effect', job: 'j1', at: 97 } as const];
    expect(rulesOf(twice)).toEqual(["jobs: a staged job's effect was applied 2 times"]);
  });

  it('finds a refusal without Retry-After, and a 409 that is not idempotency_key_in_use', () => {
    const bare = [
      ...cleanHistory(),
      answer(26, { client: 'c3', status: 503, code: 'idempotency_store_unavailable' }),
    ];
    expect(rulesOf(bare)).toEqual([
      'refusals: 503 idempotency_store_unavailable without a Retry-After of whole seconds (undefined)',
    ]);
    const dated = [
      ...cleanHistory(),
      answer(26, {
        client: 'c3',
        status: 409,
        code: 'idempotency_key_in_use',
        retryAfter: 'Wed, 02 Dec 2026 15:00:00 GMT',
      }),
    ];
    expect(rulesOf(dated)).toEqual([
      'refusals: 409 idempotency_key_in_use without a Retry-After of whole seconds (Wed, 02 Dec 2026 15:00:00 GMT)',
    ]);
    const plain = [...cleanHistory(), answer(26, { client: 'c3', status: 409, code: undefined })];
    expect(rulesOf(plain)).toEqual([
      'refusals: 409 that is not idempotency_key_in_use problem+json (code undefined)',
    ]);
  });
});
