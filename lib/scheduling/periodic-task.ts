import { AsyncLocalStorage } from 'node:async_hooks';
import type { ModuleRef } from '@nestjs/core';
import type * as Schedule from '@nestjs/schedule';
import { loadOptionalPeer } from '../utils/load-optional-peer';

/** Set while an application is created that must not run background work (the operator tool). */
const unscheduled = new AsyncLocalStorage<true>();

/**
 * Runs `create` (the creation of an application context) so that no periodic task it starts is
 * scheduled: the purge, the completer and the job drainer stay idle in that application, while
 * a call of their own (`purgeExpired()`) still runs. Used by the operator tool, whose short-lived
 * context must not do an instance's background work.
 * @param create - creates and initialises the application
 * @returns what `create` returns
 */
export function withoutSchedules<T>(create: () => Promise<T>): Promise<T> {
  return unscheduled.run(true, create);
}

/** How a scheduled run of a periodic task ended: its result, or its error. */
export type PeriodicRunOutcome<T> = { result: T; error?: undefined } | { error: unknown };

/** The part of `@nestjs/schedule`'s SchedulerRegistry a periodic task uses. */
type IntervalRegistry = Pick<Schedule.SchedulerRegistry, 'addInterval' | 'deleteInterval'>;

/**
 * Background work of the module (the purge, the completer, the job drainer) on an interval
 * from application bootstrap to shutdown. A run never overlaps the previous one: a call while
 * one is under way joins it. The interval is registered in `@nestjs/schedule`'s
 * SchedulerRegistry when the application has `ScheduleModule.forRoot()`, as
 * `nest-idempotency:<name>` (`…:2` for a second module instance, and so on).
 *
 * A task started with a `pacing` may skip ticks: after each scheduled run, pacing says how long
 * to wait before the next (an idle drainer backs off), and `wake()` ends the wait at the next
 * tick. A skipped tick costs a timer callback, no database work.
 */
export class PeriodicTask<T> {
  private timer?: NodeJS.Timeout;
  private running?: Promise<T>;
  /** Removes the interval from the SchedulerRegistry it was registered in, if any. */
  private unregister?: () => void;
  /** Epoch ms before which ticks are skipped. */
  private notBefore = 0;
  /** Epoch ms of the last `wake()`. */
  private wokenAt = 0;

  /**
   * @param name - the task's name in the registry, after `nest-idempotency:`
   * @param work - one run
   */
  constructor(
    readonly name: string,
    private readonly work: () => Promise<T>,
  ) {}

  /** Runs now, or joins the run under way. */
  run(): Promise<T> {
    if (!this.running) this.running = this.work().finally(() => (this.running = undefined));
    return this.running;
  }

  /**
   * Runs every `intervalSeconds` until `stop()`; a failed run is reported to `onError`.
   * @param moduleRef - where the SchedulerRegistry is looked up
   * @param pacing - after each scheduled run, the seconds to wait before the next one (ticks
   *   in between are skipped); without it, every tick runs
   */
  async start(
    intervalSeconds: number,
    moduleRef: ModuleRef,
    onError: (error: unknown) => void,
    pacing?: (outcome: PeriodicRunOutcome<T>) => number,
  ): Promise<void> {
    if (unscheduled.getStore()) return;
    this.timer = setInterval(() => this.tick(onError, pacing), intervalSeconds * 1000);
    this.timer.unref();
    const registry = await findSchedulerRegistry(moduleRef);
    this.unregister = registry && this.register(registry, this.timer);
  }

  /**
   * Ends a pacing wait: the next tick runs (a wake during a run applies after it). For work that
   * just arrived, e.g. a job this process staged.
   */
  wake(): void {
    this.wokenAt = Date.now();
    this.notBefore = 0;
  }

  private tick(
    onError: (error: unknown) => void,
    pacing?: (outcome: PeriodicRunOutcome<T>) => number,
  ): void {
    const startedAt = Date.now();
    if (startedAt < this.notBefore) return;
    const pace = (outcome: PeriodicRunOutcome<T>) => {
      if (!pacing || !this.timer) return;
      const waitMs = Math.max(0, pacing(outcome) * 1000);
      // Woken while this run was under way: what woke it may have come too late for the run.
      this.notBefore = this.wokenAt >= startedAt ? 0 : Date.now() + waitMs;
    };
    void this.run().then(
      (result) => pace({ result }),
      (error: unknown) => {
        onError(error);
        pace({ error });
      },
    );
  }

  /** Stops the interval (a run under way finishes on its own). */
  stop(): void {
    if (!this.timer) return;
    try {
      this.unregister?.();
    } catch {
      // already removed by the application
    }
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Registers the interval under the first free name (the registry refuses a duplicate).
   * @returns what removes it from the registry
   */
  private register(registry: IntervalRegistry, timer: NodeJS.Timeout): () => void {
    const base = `nest-idempotency:${this.name}`;
    for (let n = 1; ; n++) {
      const name = n === 1 ? base : `${base}:${n}`;
      try {
        registry.addInterval(name, timer);
        return () => registry.deleteInterval(name);
      } catch (error) {
        if (n >= 100) throw error;
      }
    }
  }
}

/**
 * The application's `SchedulerRegistry`, when it has `@nestjs/schedule` (an optional peer, see
 * `loadOptionalPeer`) and `ScheduleModule.forRoot()`.
 */
async function findSchedulerRegistry(moduleRef: ModuleRef): Promise<IntervalRegistry | undefined> {
  try {
    const schedule = await loadOptionalPeer<typeof Schedule>('@nestjs/schedule');
    return schedule && moduleRef.get(schedule.SchedulerRegistry, { strict: false });
  } catch {
    return undefined; // no @nestjs/schedule, or no ScheduleModule.forRoot()
  }
}
