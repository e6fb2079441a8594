/**
 * The waiters of one instance: at most `maxWaiters` wait at once (past it, `full` at once), a
 * wake-up that comes while a request is not asleep (its claim on its way) is kept for its next
 * sleep, a wait ends at its time, a poll wakes one waiter of a key while wake-ups are not
 * pushed (and none while they are), and shutdown ends every wait.
 */
import { IdempotencyWaiters } from '../../lib/waiting/idempotency-waiters';
import type { IdempotencyStoreWakeUps } from '../../lib/storage/idempotency-store.capabilities';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../lib';

function waitersWith(maxWaiters: number, wakeUps?: Partial<IdempotencyStoreWakeUps>) {
  const remote = {
    listen: jest.fn(),
    pushing: false,
    close: jest.fn(async () => undefined),
    ...wakeUps,
  };
  const waiters = new IdempotencyWaiters({ ...DEFAULT_IDEMPOTENCY_OPTIONS, maxWaiters } as any, {
    wakeUps: remote,
  });
  return { waiters, remote };
}

const LONG = 60_000;

describe('IdempotencyWaiters', () => {
  afterEach(() => jest.useRealTimers());

  it('lets maxWaiters requests wait at once; the next is refused at once, and admitted once one left', async () => {
    const { waiters } = waitersWith(2);
    const watches = ['a', 'a', 'b'].map((token) => waiters.watch(token));
    const sleeping = watches.slice(0, 2).map((watch) => watch.sleep(LONG, LONG));
    expect(waiters.size).toBe(2);
    expect(await watches[2].sleep(LONG, LONG)).toBe('full');
    expect(waiters.size).toBe(2);
    waiters.settled('a');
    expect(await Promise.all(sleeping)).toEqual(['woken', 'woken']);
    // Between two waits a request still counts: it is looking again.
    expect(waiters.size).toBe(2);
    watches[0].end();
    expect(waiters.size).toBe(1);
    const third = waiters.watch('b');
    const admitted = third.sleep(LONG, LONG);
    expect(waiters.size).toBe(2);
    waiters.settled('b');
    expect(await admitted).toBe('woken');
    for (const watch of [...watches, third]) watch.end();
    expect(waiters.size).toBe(0);
    expect(waiters.waiting).toBe(false);
  });

  it('keeps a wake-up that came while the claim was on its way', async () => {
    const { waiters } = waitersWith(10);
    const watch = waiters.watch('k');
    waiters.settled('k');
    expect(await watch.sleep(LONG, LONG)).toBe('woken');
    watch.end();
  });

  it('wakes only the waiters of the settled key; missed() wakes them all', async () => {
    const { waiters } = waitersWith(10);
    const [a, b, c] = ['a', 'b', 'c'].map((token) => waiters.watch(token));
    const ends: string[] = [];
    const track = (watch: typeof a, name: string) =>
      watch.sleep(LONG, LONG).then((end) => ends.push(`${name}:${end}`));
    const pending = [track(a, 'a'), track(b, 'b')];
    waiters.settled('a');
    await pending[0];
    expect(ends).toEqual(['a:woken']);
    const more = [track(a, 'a'), track(c, 'c')];
    waiters.missed();
    await Promise.all([...pending, ...more]);
    expect(ends.sort()).toEqual(['a:woken', 'a:woken', 'b:woken', 'c:woken']);
    for (const watch of [a, b, c]) watch.end();
  });

  it('ends a wait at its time', async () => {
    jest.useFakeTimers();
    const { waiters } = waitersWith(10);
    const watch = waiters.watch('k');
    const end = watch.sleep(1_000, LONG);
    jest.advanceTimersByTime(1_000);
    expect(await end).toBe('timeout');
    watch.end();
  });

  it('polls each key every pollMs, waking one of its waiters, even while wake-ups are pushed', async () => {
    jest.useFakeTimers();
    const { waiters, remote } = waitersWith(10);
    const [first, second] = [waiters.watch('k'), waiters.watch('k')];
    const ends: string[] = [];
    void first.sleep(LONG, 200).then((end) => ends.push(`first:${end}`));
    void second.sleep(LONG, 200).then((end) => ends.push(`second:${end}`));
    (remote as { pushing: boolean }).pushing = true;
    jest.advanceTimersByTime(199);
    await Promise.resolve();
    expect(ends).toEqual([]);
    jest.advanceTimersByTime(1);
    await Promise.resolve();
    expect(ends).toEqual(['first:woken']);
    first.end();
    second.end();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('opens the store wake-ups at prepare(), and at shutdown ends every wait and closes them', async () => {
    const { waiters, remote } = waitersWith(10);
    waiters.prepare();
    expect(remote.listen).toHaveBeenCalledWith(waiters);
    const watch = waiters.watch('k');
    const end = watch.sleep(LONG, LONG);
    await waiters.onModuleDestroy();
    expect(await end).toBe('closed');
    expect(remote.close).toHaveBeenCalled();
    watch.end();
    expect(await waiters.watch('k').sleep(LONG, LONG)).toBe('full');
  });
});
