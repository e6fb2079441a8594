import { Inject, Injectable, Logger } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { IdempotencyError } from '../errors/idempotency-configuration.error';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { IdempotencyPhaseEngine } from '../phases/idempotency-phase-engine';
import type { PhaseEngineParts } from '../phases/idempotency-phase-engine';
import { IdempotencyOperationRegistry } from '../phases/operation-registry';
import { PeriodicTask } from '../scheduling/periodic-task';
import type { TakenJob } from '../storage/typeorm/typeorm-job.store';
import type { TypeOrmStoreTransaction } from '../storage/typeorm/typeorm-store-transaction';
import type { DeadJob, StagedJob } from './staged-job.interface';

/** What one drain did. */
export interface DrainSummary {
  delivered: number;
  failed: number;
  /** Of the failed, how many are now dead. */
  dead: number;
}

/**
 * Delivers staged jobs (SPEC §8) to their `@IdempotencyJobHandler()`s. Each drain transaction
 * (READ COMMITTED) takes a batch with `FOR UPDATE SKIP LOCKED` — so two drainers, on one
 * instance or many, never hold the same job — delivers each job under its own savepoint, then
 * deletes exactly the rows it delivered, by id, and commits. A crash before the commit leaves
 * the jobs to be delivered again: delivery is at least once, with the same `job.key`. A failed
 * delivery waits with exponential backoff and full jitter, and after `jobs.maxAttempts` is kept
 * as dead for a human (`job_failed` event with `dead: true`, `listDeadJobs()`).
 */
@Injectable()
export class IdempotencyJobs implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyJobs');
  private readonly task = new PeriodicTask('jobs', () => this.drainAll());

  constructor(
    private readonly engine: IdempotencyPhaseEngine,
    private readonly registry: IdempotencyOperationRegistry,
    private readonly events: IdempotencyEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * Drains now (or joins the drain under way): batch after batch until a short one.
   * @throws when the store is unreachable
   */
  drain(): Promise<DrainSummary> {
    return this.task.run();
  }

  /** Dead jobs, oldest first. */
  listDeadJobs(limit = 100): Promise<DeadJob[]> {
    return this.parts().jobs.listDead(limit);
  }

  /**
   * Puts a dead job back in the queue, due now, with its attempts reset.
   * @returns false when no dead job has that id
   */
  retryDeadJob(id: string): Promise<boolean> {
    return this.parts().jobs.retryDead(id);
  }

  /**
   * Deletes a dead job for good.
   * @returns false when no dead job has that id
   */
  deleteDeadJob(id: string): Promise<boolean> {
    return this.parts().jobs.deleteDead(id);
  }

  /** @inheritDoc */
  async onApplicationBootstrap(): Promise<void> {
    const { enabled, intervalSeconds } = this.options.jobs;
    if (!enabled || !this.engine.parts || !this.registry.hasJobHandlers()) return;
    await this.task.start(intervalSeconds, this.moduleRef, (error) => {
      this.events.emit({ type: 'store_error', operation: 'jobs', error });
      this.logger.warn(`Job drain failed: ${(error as Error).message}`);
    });
  }

  /** @inheritDoc */
  onApplicationShutdown(): void {
    this.task.stop();
  }

  private async drainAll(): Promise<DrainSummary> {
    const summary: DrainSummary = { delivered: 0, failed: 0, dead: 0 };
    const parts = this.engine.parts;
    if (!parts) return summary;
    let cutoff: string | null = null;
    for (;;) {
      const batch = await this.drainBatch(parts, summary, cutoff);
      cutoff = batch.cutoff;
      if (batch.taken < this.options.jobs.batchSize) return summary;
    }
  }

  private async drainBatch(
    parts: PhaseEngineParts,
    summary: DrainSummary,
    since: string | null,
  ): Promise<{ taken: number; cutoff: string | null }> {
    const tx = await parts.jobs.begin();
    try {
      const { jobs, cutoff } = await parts.jobs.take(tx, this.options.jobs.batchSize, since);
      const delivered: string[] = [];
      for (const job of jobs) {
        if (await this.deliver(parts, tx, job, summary)) delivered.push(job.id);
      }
      await parts.jobs.delete(tx, delivered);
      await tx.commit();
      return { taken: jobs.length, cutoff };
    } catch (error) {
      await tx.rollback().catch(() => undefined);
      throw error;
    }
  }

  /** Delivers one job under a savepoint; a failure rolls its writes back and is recorded. */
  private async deliver(
    parts: PhaseEngineParts,
    tx: TypeOrmStoreTransaction,
    job: TakenJob,
    summary: DrainSummary,
  ): Promise<boolean> {
    const staged: StagedJob = {
      id: job.id,
      name: job.name,
      args: job.args,
      key: job.key,
      attempt: job.attempts + 1,
      origin: { scope: job.originScope, key: job.originKey },
    };
    await tx.manager.query('SAVEPOINT nest_idempotency_job');
    try {
      const handler = this.registry.jobHandler(job.name);
      if (!handler) {
        throw new IdempotencyError(
          `nest-idempotency: no @IdempotencyJobHandler('${job.name}') is registered`,
        );
      }
      await handler.handle(staged, tx.manager);
      await tx.manager.query('RELEASE SAVEPOINT nest_idempotency_job');
    } catch (error) {
      await tx.manager.query('ROLLBACK TO SAVEPOINT nest_idempotency_job');
      const { maxAttempts, backoffSeconds, maxBackoffSeconds } = this.options.jobs;
      // Full jitter: anywhere up to the doubled (and capped) backoff.
      const delay = Math.random() * Math.min(maxBackoffSeconds, backoffSeconds * 2 ** job.attempts);
      const message = error instanceof Error ? error.message : String(error);
      const dead = await parts.jobs.fail(tx, job.id, message, delay, maxAttempts);
      summary.failed++;
      if (dead) summary.dead++;
      this.events.emit({ type: 'job_failed', ...this.describe(staged), dead, error });
      if (dead)
        this.logger.error(
          `Job ${job.name} (${job.id}) is dead after ${staged.attempt} attempts: ${message}`,
        );
      return false;
    }
    summary.delivered++;
    this.events.emit({ type: 'job_delivered', ...this.describe(staged) });
    return true;
  }

  private describe(job: StagedJob) {
    return { id: job.id, name: job.name, key: job.key, attempt: job.attempt };
  }

  private parts(): PhaseEngineParts {
    const parts = this.engine.parts;
    if (!parts) {
      throw new IdempotencyError('nest-idempotency: staged jobs need the TypeORM store.');
    }
    return parts;
  }
}
