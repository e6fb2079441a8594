/**
 * The `waited` event of `claimOrWait`, for the ends a real request reaches only rarely: the store
 * fails on a claim after the wait (`error`), the application shuts down (`shutdown`), the key
 * settles in a way the request is refused (`rejected`: another body, or a completion whose body
 * was not kept). One event per request that waited, and none for one that did not wait.
 */
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../lib';
import { BODY_OMITTED_HEADER } from '../../lib/config/idempotency.constants';
import { IdempotencyEvents } from '../../lib/events/idempotency.events';
import type { IdempotencyEvent } from '../../lib/events/idempotency.events';
import type { ClaimResult } from '../../lib/interfaces/idempotency-record.interface';
import { IdempotencyWaiters } from '../../lib/waiting/idempotency-waiters';
import { claimOrWait } from '../../lib/execution/wait-for-claim';

const IN_FLIGHT: ClaimResult = { outcome: 'in_flight', recordId: 'r' };
/** Polled every 20 ms: a waiter looks again without a wake-up. */
const WAIT = { maxSeconds: 5, defaultSeconds: 0, pollIntervalSeconds: 0.02 };

function setup() {
  const waiters = new IdempotencyWaiters({ ...DEFAULT_IDEMPOTENCY_OPTIONS } as any, {});
  const events = new IdempotencyEvents();
  const seen: IdempotencyEvent[] = [];
  events.subscribe((event) => seen.push(event));
  /** One request on `POST /w` with `Prefer: wait=5`, whose claims answer `answers` in turn. */
  const run = (answers: (ClaimResult | Error)[], prefer = 'wait=5') => {
    let i = 0;
    return claimOrWait(
      waiters,
      events,
      WAIT,
      {
        request: { headers: { prefer } },
        setHeader: () => undefined,
        scope: 's',
        key: 'k',
        route: 'POST /w',
      },
      async () => {
        const answer = answers[Math.min(i++, answers.length - 1)];
        if (answer instanceof Error) throw answer;
        return answer;
      },
    );
  };
  return { waiters, seen, run };
}

describe('the waited event', () => {
  it('error: a claim after the wait fails; the failure goes on, reported once', async () => {
    const { seen, run } = setup();
    await expect(run([IN_FLIGHT, new Error('store down')])).rejects.toThrow('store down');
    expect(seen).toEqual([
      {
        type: 'waited',
        scope: 's',
        key: 'k',
        outcome: 'error',
        waitedMs: expect.any(Number),
        route: 'POST /w',
      },
    ]);
  });

  it('shutdown: the application closes while the request waits', async () => {
    const { waiters, seen, run } = setup();
    const waiting = run([IN_FLIGHT]);
    while (waiters.size === 0) await new Promise((resolve) => setImmediate(resolve));
    await waiters.onModuleDestroy();
    expect((await waiting).outcome).toBe('in_flight');
    expect(seen.map((e) => e.type === 'waited' && e.outcome)).toEqual(['shutdown']);
  });

  it.each<[string, ClaimResult]>([
    ['another body took the released key', { outcome: 'mismatch', recordId: 'r' }],
    ['an operation abandoned', { outcome: 'abandoned', recordId: 'r' }],
    [
      'a completion whose body was not kept',
      {
        outcome: 'completed',
        recordId: 'r',
        response: {
          status: 201,
          headers: { [BODY_OMITTED_HEADER]: 'not_kept' },
          body: Buffer.alloc(0),
        },
      },
    ],
  ])('rejected: %s', async (_, settled) => {
    const { seen, run } = setup();
    expect((await run([IN_FLIGHT, settled])).outcome).toBe(settled.outcome);
    expect(seen.map((e) => e.type === 'waited' && e.outcome)).toEqual(['rejected']);
  });

  it('replayed: a completion with its body', async () => {
    const { seen, run } = setup();
    const completed: ClaimResult = {
      outcome: 'completed',
      recordId: 'r',
      response: { status: 201, headers: {}, body: Buffer.alloc(0) },
    };
    await run([IN_FLIGHT, IN_FLIGHT, completed]);
    expect(seen.map((e) => e.type === 'waited' && e.outcome)).toEqual(['replayed']);
  });

  it('none for a request that did not wait: the key was not in flight, or it asked not to', async () => {
    const { seen, run } = setup();
    await run([{ outcome: 'claimed', recordId: 'r', attempt: 1 }]);
    await run([IN_FLIGHT], 'wait=0');
    await expect(run([new Error('store down')])).rejects.toThrow();
    expect(seen).toEqual([]);
  });
});
