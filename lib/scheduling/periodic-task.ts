import type { ModuleRef } from '@nestjs/core';
import type * as Schedule from '@nestjs/schedule';
import { loadOptionalPeer } from '../utils/load-optional-peer';

/** The part of `@nestjs/schedule`'s SchedulerRegistry a periodic task uses. */
interface IntervalRegistry {
  addInterval(name: string, id: NodeJS.Timeout): void;
  deleteInterval(name: string): void;
}

/**
 * Background work of the module (the purge, the completer, the job drainer) on an interval
 * from application bootstrap to shutdown. A run never overlaps the previous one: a call while
 * one is under way joins it. The interval is registered in `@nestjs/schedule`'s
 * SchedulerRegistry when the application has `ScheduleModule.forRoot()`, as
 * `nest-idempotency:<name>` (`…:2` for a second module instance, and so on).
 */
export class PeriodicTask<T> {
  private timer?: NodeJS.Timeout;
  private running?: Promise<T>;
  private registry?: IntervalRegistry;
  private intervalName?: string;

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
   */
  async start(
    intervalSeconds: number,
    moduleRef: ModuleRef,
    onError: (error: unknown) => void,
  ): Promise<void> {
    this.timer = setInterval(() => void this.run().catch(onError), intervalSeconds * 1000);
    this.timer.unref();
    this.registry = await findSchedulerRegistry(moduleRef);
    if (this.registry) this.intervalName = this.register(this.registry, this.timer);
  }

  /** Stops the interval (a run under way finishes on its own). */
  stop(): void {
    if (!this.timer) return;
    if (this.registry && this.intervalName) {
      try {
        this.registry.deleteInterval(this.intervalName);
      } catch {
        // already removed by the application
      }
    }
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Registers the interval under the first free name: the registry refuses a duplicate. */
  private register(registry: IntervalRegistry, timer: NodeJS.Timeout): string {
    const base = `nest-idempotency:${this.name}`;
    for (let n = 1; ; n++) {
      const name = n === 1 ? base : `${base}:${n}`;
      try {
        registry.addInterval(name, timer);
        return name;
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
    if (!schedule) return undefined;
    const { SchedulerRegistry } = schedule;
    return moduleRef.get(SchedulerRegistry, { strict: false });
  } catch {
    return undefined; // no @nestjs/schedule, or no ScheduleModule.forRoot()
  }
}
