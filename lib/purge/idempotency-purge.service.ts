import { Inject, Injectable, Logger } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type * as Schedule from '@nestjs/schedule';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { IdempotencyStore } from '../storage/idempotency.store';

/**
 * Name of the interval in `@nestjs/schedule`'s SchedulerRegistry, when the app uses it. A second
 * `IdempotencyModule` in one application (one per DataSource, say) registers as `…:2`, and so on.
 */
export const IDEMPOTENCY_PURGE_INTERVAL = 'nest-idempotency:purge';

/**
 * Deletes records past their replay window, in batches, never touching a live lease. Runs on an
 * interval from application bootstrap to shutdown (registered in `@nestjs/schedule`'s
 * SchedulerRegistry when the application has `ScheduleModule.forRoot()`), and on demand through
 * `purgeExpired()`. Several instances can purge at once: batches are picked with
 * `FOR UPDATE SKIP LOCKED`.
 */
@Injectable()
export class IdempotencyPurgeService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyPurge');
  private timer?: NodeJS.Timeout;
  private running?: Promise<number>;
  private intervalName?: string;
  private registry?: {
    addInterval(name: string, id: NodeJS.Timeout): void;
    deleteInterval(name: string): void;
  };

  constructor(
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * Deletes every expired record now, batch after batch. A call while a run is under way
   * joins that run.
   * @returns how many records were deleted
   * @throws when the store is unreachable
   */
  purgeExpired(): Promise<number> {
    if (!this.running) {
      this.running = this.purgeAll().finally(() => (this.running = undefined));
    }
    return this.running;
  }

  /** @inheritDoc */
  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.purge.enabled) return;
    this.timer = setInterval(() => {
      this.purgeExpired().catch((error) => {
        this.events.emit({ type: 'store_error', operation: 'purge', error });
        this.logger.warn(`Purge failed: ${(error as Error).message}`);
      });
    }, this.options.purge.intervalSeconds * 1000);
    this.timer.unref();
    this.registry = await this.findSchedulerRegistry();
    if (this.registry) this.intervalName = this.register(this.registry, this.timer);
  }

  /** @inheritDoc */
  onApplicationShutdown(): void {
    if (!this.timer) return;
    if (this.registry) {
      try {
        this.registry.deleteInterval(this.intervalName ?? IDEMPOTENCY_PURGE_INTERVAL);
      } catch {
        // already removed by the application
      }
    }
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Registers the interval under the first free name: the registry refuses a duplicate. */
  private register(
    registry: NonNullable<IdempotencyPurgeService['registry']>,
    timer: NodeJS.Timeout,
  ): string {
    for (let n = 1; ; n++) {
      const name = n === 1 ? IDEMPOTENCY_PURGE_INTERVAL : `${IDEMPOTENCY_PURGE_INTERVAL}:${n}`;
      try {
        registry.addInterval(name, timer);
        return name;
      } catch (error) {
        if (n >= 100) throw error;
      }
    }
  }

  private async purgeAll(): Promise<number> {
    const started = Date.now();
    const { batchSize } = this.options.purge;
    let total = 0;
    for (;;) {
      const deleted = await this.store.purgeExpired(batchSize);
      total += deleted;
      if (deleted < batchSize) break;
    }
    this.events.emit({ type: 'purged', count: total, durationMs: Date.now() - started });
    return total;
  }

  /**
   * The application's `SchedulerRegistry`, when it has `@nestjs/schedule` (an optional peer,
   * hence loaded here rather than imported) and `ScheduleModule.forRoot()`. The published build
   * is CommonJS and uses `require`, which returns the application's own module instance in a
   * CommonJS app and, through `require(esm)`, in a Nest 12 ESM app too; so does Jest's CommonJS
   * runtime. Where the code runs as ESM (Jest's ESM mode, used for the Nest 12 test leg)
   * `require` does not exist and `import()` does the same.
   */
  private async findSchedulerRegistry(): Promise<IdempotencyPurgeService['registry']> {
    try {
      const { SchedulerRegistry } = (
        typeof require === 'function'
          ? // eslint-disable-next-line @typescript-eslint/no-require-imports
            require('@nestjs/schedule')
          : await import('@nestjs/schedule')
      ) as typeof Schedule;
      return this.moduleRef.get(SchedulerRegistry, { strict: false });
    } catch {
      return undefined; // no @nestjs/schedule, or no ScheduleModule.forRoot()
    }
  }
}
