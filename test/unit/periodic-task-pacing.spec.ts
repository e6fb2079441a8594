/**
 * An idle periodic task skips ticks (the job drainer's idle backoff): the gap between runs that
 * find nothing doubles up to the cap, a run that finds work brings it back to every tick, a
 * known due time is never overslept, and `wake()` runs at the next tick, even when it comes
 * during a run. Fake timers: no waiting.
 */
import type { ModuleRef } from '@nestjs/core';
import { IdleBackoff } from '../../lib/scheduling/idle-backoff';
import { PeriodicTask } from '../../lib/scheduling/periodic-task';

/** No ScheduleModule: the task keeps its interval to itself. */
const moduleRef = {
  get: () => {
    throw new Error('no SchedulerRegistry');
  },
} as unknown as ModuleRef;

describe('PeriodicTask with idle pacing', () => {
  let task: PeriodicTask<{ found: boolean; dueIn?: number }>;
  let runsAt: number[];
  let found: (run: number) => boolean;
  let dueIn: number | undefined;
  let hold: Promise<void> | undefined;
  const backoff = new IdleBackoff(1, 8);
  const t0 = Date.UTC(2026, 0, 1);

  beforeEach(async () => {
    jest.useFakeTimers({ now: t0 });
    backoff.reset();
    runsAt = [];
    found = () => false;
    dueIn = undefined;
    hold = undefined;
    task = new PeriodicTask('test', async () => {
      runsAt.push((Date.now() - t0) / 1000);
      await hold;
      return { found: found(runsAt.length), dueIn };
    });
    await task.start(
      1,
      moduleRef,
      () => undefined,
      (outcome) =>
        'result' in outcome
          ? backoff.next(outcome.result.found, outcome.result.dueIn)
          : backoff.next(false),
    );
  });

  afterEach(() => {
    task.stop();
    jest.useRealTimers();
  });

  it('doubles the gap between idle runs up to the cap', async () => {
    await jest.advanceTimersByTimeAsync(40_000);
    expect(runsAt).toEqual([1, 3, 7, 15, 23, 31, 39]);
  });

  it('runs every tick while runs find work, and backs off again from the first idle run', async () => {
    found = (run) => run <= 3;
    await jest.advanceTimersByTimeAsync(12_000);
    expect(runsAt).toEqual([1, 2, 3, 4, 6, 10]);
  });

  it('does not sleep past a known due time', async () => {
    dueIn = 2.5; // the backoff alone would run at 1, 3, 7, 15
    await jest.advanceTimersByTimeAsync(13_000);
    expect(runsAt).toEqual([1, 3, 6, 9, 12]);
  });

  it('runs at the next tick after wake(), also when woken during a run', async () => {
    await jest.advanceTimersByTimeAsync(7_000); // runs at 1, 3, 7
    await jest.advanceTimersByTimeAsync(1_500);
    backoff.reset();
    task.wake();
    await jest.advanceTimersByTimeAsync(500);
    expect(runsAt).toEqual([1, 3, 7, 9]);

    let finish!: () => void;
    hold = new Promise((resolve) => (finish = resolve));
    await jest.advanceTimersByTimeAsync(2_000); // the run at 11 waits
    expect(runsAt).toEqual([1, 3, 7, 9, 11]);
    backoff.reset();
    task.wake();
    hold = undefined;
    finish();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(runsAt).toEqual([1, 3, 7, 9, 11, 12]);
  });
});
