/**
 * The operator tool creates its application inside `withoutSchedules()`: a periodic task (the
 * purge, the completer, the job drainer) started there never runs on its interval, while a call
 * of its own still runs, and a task started elsewhere at the same time keeps its schedule.
 * Fake timers: no waiting.
 */
import type { ModuleRef } from '@nestjs/core';
import { PeriodicTask, withoutSchedules } from '../../lib/scheduling/periodic-task';

/** No ScheduleModule: the task keeps its interval to itself. */
const moduleRef = {
  get: () => {
    throw new Error('no SchedulerRegistry');
  },
} as unknown as ModuleRef;

describe('withoutSchedules', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('starts no interval for tasks started inside it; on-demand runs still run', async () => {
    let quiet = 0;
    let scheduled = 0;
    const quietTask = new PeriodicTask('quiet', async () => ++quiet);
    const scheduledTask = new PeriodicTask('scheduled', async () => ++scheduled);
    await withoutSchedules(async () => {
      // As Nest's bootstrap hooks do: started further down the same async call chain.
      await Promise.resolve();
      await quietTask.start(1, moduleRef, () => undefined);
    });
    await scheduledTask.start(1, moduleRef, () => undefined);

    await jest.advanceTimersByTimeAsync(5_000);
    expect({ quiet, scheduled }).toEqual({ quiet: 0, scheduled: 5 });

    expect(await quietTask.run()).toBe(1);
    quietTask.stop();
    scheduledTask.stop();
  });
});
