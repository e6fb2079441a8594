import { Inject, Injectable, Logger } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { abandonedEvent } from '../phases/operation-events';
import { PeriodicTask } from '../scheduling/periodic-task';
import { IdempotencyStore } from '../storage/idempotency.store';
import type { IdempotencyStoreCapabilities } from '../storage/idempotency-store.capabilities';

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
 * `FOR UPDATE SKIP LOCKED`. A run that deleted anything emits a `purged` event; an idle one
 * emits nothing.
 *
 * It is also the reaper of operations in phases (docs/design/contract.md#operations-in-phases): it never deletes an unfinished one.
 * One past its TTL is marked `abandoned` (an `operation_abandoned` event) and kept until an
 * operator resolves it or `purge.abandonedRetentionSeconds` pass.
 */
@Injectable()
export class IdempotencyPurgeService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyPurge');
  private readonly task = new PeriodicTask('purge', () => this.purgeAll());

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES)
    private readonly capabilities: IdempotencyStoreCapabilities,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * Deletes every expired record now, batch after batch, and reaps unfinished operations. A call
   * while a run is under way joins that run.
   * @returns how many records were deleted
   * @throws when the store is unreachable (after a `store_error` event, as on the schedule)
   */
  purgeExpired(): Promise<number> {
    return this.task.run();
  }

  /** @inheritDoc */
  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.purge.enabled) return;
    await this.task.start(this.options.purge.intervalSeconds, this.moduleRef, (error) => {
      // The run itself emitted the store_error event (see `purgeAll`).
      this.logger.warn(`Purge failed: ${(error as Error).message}`);
    });
  }

  /** @inheritDoc */
  onApplicationShutdown(): void {
    this.task.stop();
  }

  /** One run, scheduled or called: a failure is a `store_error` event, whoever started it. */
  private async purgeAll(): Promise<number> {
    const started = Date.now();
    const { batchSize, abandonedRetentionSeconds } = this.options.purge;
    try {
      let total = await inBatches(batchSize, () => this.store.purgeExpired(batchSize));
      // The reaper: unfinished operations past their TTL are marked abandoned, never deleted;
      // abandoned ones kept long enough are.
      const phases = this.capabilities.operations;
      if (phases) {
        await inBatches(batchSize, async () => {
          const reaped = await phases.reapExpired(batchSize);
          for (const row of reaped) this.events.emit(abandonedEvent(row, 'expired'));
          return reaped.length;
        });
        total += await inBatches(batchSize, () =>
          phases.deleteAbandoned(batchSize, abandonedRetentionSeconds),
        );
      }
      // An idle purge is silent: a `purged` event per interval that deleted nothing is noise.
      if (total > 0) {
        this.events.emit({ type: 'purged', count: total, durationMs: Date.now() - started });
      }
      return total;
    } catch (error) {
      this.events.emit({ type: 'store_error', operation: 'purge', error });
      throw error;
    }
  }
}

/** Runs `batch` until one does fewer than `size` rows; returns the rows all did. */
async function inBatches(size: number, batch: () => Promise<number>): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await batch();
    total += rows;
    if (rows < size) return total;
  }
}
