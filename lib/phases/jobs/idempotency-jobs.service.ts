import { Inject, Injectable, Logger } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { IdempotencyError } from '../../config/idempotency-configuration.error';
import { IdempotencyEvents } from '../../events/idempotency.events';
import { IDEMPOTENCY_STORE_CAPABILITIES } from '../../config/idempotency.tokens';
import type { ResolvedIdempotencyPhasesOptions } from '../idempotency-phases.options';
import { IDEMPOTENCY_PHASES_OPTIONS } from '../idempotency-phases.tokens';
import { IdempotencyOperationRegistry } from '../operation-registry';
import { IdleBackoff } from '../../scheduling/idle-backoff';
import { PeriodicTask } from '../../scheduling/periodic-task';
import type { IdempotencyStoreCapabilities } from '../../storage/idempotency-store.capabilities';
import type { PeriodicRunOutcome } from '../../scheduling/periodic-task';
import { isCommitUnconfirmed } from '../../storage/commit-unconfirmed.error';
import { jobErrorText } from './job-error-text';
import { untilAborted } from '../operation-step-support';
import type { DeadJob, StagedJob } from './staged-job.interface';
import type { ClaimedJob, JobDelivery, StagedJobStore } from './staged-job.store';

/** What one drain did. */
export interface DrainSummary {
  /** Jobs delivered (and deleted), those whose commit was unconfirmed (`job_unconfirmed`) included. */
  delivered: number;
  /** Deliveries that failed, timed out included. */
  failed: number;
  /** Of the failed, how many are now dead. */
  dead: number;
}

/** A drain's summary with what its last look-up saw: when the next job is due. */
interface DrainRun extends DrainSummary {
  nextDueInSeconds: number | undefined;
}

/**
 * Delivers staged jobs (docs/design/contract.md#operations-in-phases) to their `@IdempotentJobHandler()`s, one job at a time, each
 * on its own: a plain read finds due jobs; each is claimed by one committed statement that
 * counts the attempt (so a delivery that crashes, hangs or cannot record its failure still
 * counts) and skips jobs other drainers hold; it is delivered in a transaction of its own that
 * deletes its row and commits with the handler's writes. A handler gets `jobs.timeoutSeconds`
 * and an `AbortSignal`; past it, its connection is closed and its backend ended (PostgreSQL rolls
 * back and the lock goes, even mid-statement) and the drain moves on. A failure is recorded in a
 * statement of its own, with sanitized error text; it waits with exponential backoff and full
 * jitter, and after `jobs.maxAttempts` the job is kept as dead for a human (`job_failed` event
 * with `dead: true`, `listDeadJobs()`).
 * Delivery is at least once, with the same `job.key`. An idle drainer polls less and less
 * often, up to `jobs.maxIdleIntervalSeconds`; a job staged in this process wakes it.
 */
@Injectable()
export class IdempotencyJobs implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyJobs');
  private readonly task = new PeriodicTask<DrainRun>('jobs', () => this.drainAll());
  private readonly backoff: IdleBackoff;
  private stopListening?: () => void;

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES)
    private readonly capabilities: IdempotencyStoreCapabilities,
    private readonly registry: IdempotencyOperationRegistry,
    private readonly events: IdempotencyEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_PHASES_OPTIONS) private readonly phases: ResolvedIdempotencyPhasesOptions,
  ) {
    const { intervalSeconds, maxIdleIntervalSeconds } = phases.jobs;
    this.backoff = new IdleBackoff(intervalSeconds, maxIdleIntervalSeconds);
  }

  /**
   * Drains now (or joins the drain under way): every job due when the drain began, one after
   * the other. Each delivery is bounded (`jobs.timeoutSeconds`, then the store's timeout), so a
   * drain always ends.
   * @throws when the store is unreachable
   */
  async drain(): Promise<DrainSummary> {
    const { delivered, failed, dead } = await this.task.run();
    return { delivered, failed, dead };
  }

  /** Dead jobs, oldest first. */
  listDeadJobs(limit = 100): Promise<DeadJob[]> {
    return this.requireStore().listDead(limit);
  }

  /**
   * Puts a dead job back in the queue, due now, with its attempts reset.
   * @returns false when no dead job has that id
   */
  retryDeadJob(id: string): Promise<boolean> {
    return this.requireStore().retryDead(id);
  }

  /**
   * Deletes a dead job for good.
   * @returns false when no dead job has that id
   */
  deleteDeadJob(id: string): Promise<boolean> {
    return this.requireStore().deleteDead(id);
  }

  /** @inheritDoc */
  async onApplicationBootstrap(): Promise<void> {
    const { enabled, intervalSeconds } = this.phases.jobs;
    const store = this.capabilities.jobs;
    if (!enabled || !store || !this.registry.discover().jobHandlers.size) return;
    this.stopListening = store.onStaged(() => {
      this.backoff.reset();
      this.task.wake();
    });
    await this.task.start(
      intervalSeconds,
      this.moduleRef,
      (error) => {
        this.events.emit({ type: 'store_error', operation: 'jobs', error });
        this.logger.warn(`Job drain failed: ${(error as Error).message}`);
      },
      (outcome) => this.pace(outcome),
    );
  }

  /** @inheritDoc */
  onApplicationShutdown(): void {
    this.stopListening?.();
    this.task.stop();
  }

  private requireStore(): StagedJobStore {
    if (this.capabilities.jobs) return this.capabilities.jobs;
    throw new IdempotencyError('nest-idempotency: staged jobs need the TypeORM store.');
  }

  /** Seconds to wait after a scheduled drain: none after work, backing off while idle. */
  private pace(outcome: PeriodicRunOutcome<DrainRun>): number {
    if (!('result' in outcome)) return this.backoff.next(false);
    const { delivered, failed, nextDueInSeconds } = outcome.result;
    return this.backoff.next(delivered + failed > 0, nextDueInSeconds);
  }

  private async drainAll(): Promise<DrainRun> {
    const run: DrainRun = { delivered: 0, failed: 0, dead: 0, nextDueInSeconds: undefined };
    const store = this.capabilities.jobs;
    if (!store) return run;
    const { batchSize, maxAttempts } = this.phases.jobs;
    // Time for the claimed job's transaction to begin and lock it: until then, other drainers
    // leave it alone; after that its row lock keeps them off until the delivery ends.
    const leaseSeconds = store.claimHoldSeconds;
    let cutoff: string | null = null;
    for (;;) {
      const due = await store.findDue(batchSize, cutoff);
      cutoff = due.cutoff;
      run.nextDueInSeconds = due.nextDueInSeconds;
      let claimed = 0;
      for (const id of due.ids) {
        const job = await store.claim(id, cutoff, maxAttempts, leaseSeconds);
        if (!job) continue; // another drainer has it
        claimed++;
        if (job.exhausted) this.exhausted(job, run);
        else await this.deliver(store, job, run);
      }
      // A short batch is the last; so is one whose jobs all went to other drainers.
      if (due.ids.length < batchSize || claimed === 0) return run;
    }
  }

  /** Delivers one claimed job in its own transaction; a failure is recorded on its own. */
  private async deliver(store: StagedJobStore, job: ClaimedJob, run: DrainRun): Promise<void> {
    let delivery: JobDelivery | undefined;
    try {
      delivery = await store.deliver(job);
      if (!delivery) return; // its claim lapsed and another drainer took it over
      await this.runHandler(this.staged(job), delivery);
      await delivery.commit();
    } catch (error) {
      await delivery?.rollback().catch(() => undefined);
      if (!isCommitUnconfirmed(error)) return this.failed(store, job, error, run);
      // Delivered and deleted on the primary; its synchronous standby did not confirm it.
      run.delivered++;
      this.events.emit({ type: 'job_unconfirmed', ...this.describe(job), error });
      return;
    }
    run.delivered++;
    this.events.emit({ type: 'job_delivered', ...this.describe(job) });
  }

  /**
   * Runs the job's handler within `jobs.timeoutSeconds`, and ends the delivery when it fails.
   * @throws what the handler threw, or the timeout
   */
  private async runHandler(job: StagedJob, delivery: JobDelivery): Promise<void> {
    const controller = new AbortController();
    const { timeoutSeconds } = this.phases.jobs;
    const within = `within jobs.timeoutSeconds (${timeoutSeconds} s)`;
    const timedOut = `nest-idempotency: job handler '${job.name}' did not settle ${within}`;
    const timer = setTimeout(
      () => controller.abort(new IdempotencyError(timedOut)),
      timeoutSeconds * 1000,
    );
    try {
      const handler = this.registry.discover().jobHandlers.get(job.name);
      if (!handler) {
        throw new IdempotencyError(
          `nest-idempotency: no @IdempotentJobHandler('${job.name}') is registered`,
        );
      }
      const handled = Promise.resolve().then(() =>
        handler.handle(job, delivery.manager, controller.signal),
      );
      await untilAborted(handled, controller.signal);
    } catch (error) {
      // Past its time the handler may still hold the connection: close it rather than wait.
      await (controller.signal.aborted ? delivery.abandon() : delivery.rollback());
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Records a failed delivery (its attempt was counted when claimed) and reports it. */
  private async failed(
    store: StagedJobStore,
    job: ClaimedJob,
    error: unknown,
    run: DrainRun,
  ): Promise<void> {
    const { maxAttempts, backoffSeconds, maxBackoffSeconds } = this.phases.jobs;
    // Full jitter: anywhere up to the doubled (and capped) backoff.
    const delay =
      Math.random() * Math.min(maxBackoffSeconds, backoffSeconds * 2 ** (job.attempt - 1));
    const message = jobErrorText(error);
    // Twice at most: the pool may hand out the connection the failure itself killed (its reset
    // not yet noticed), and the statement only records what it would record the first time.
    const record = () => store.fail(job, message, delay, maxAttempts);
    const dead = await record()
      .catch(record)
      .then(
        (outcome) => outcome === 'dead',
        (recording: unknown) => {
          // The attempt is counted already; the job is due again when its claim lapses.
          this.logger.warn(
            `Could not record the failure of job ${job.name} (${job.id}): ` +
              `${(recording as Error).message}`,
          );
          return false;
        },
      );
    const why = `Job ${job.name} (${job.id}) is dead after ${job.attempt} attempts: ${message}`;
    this.reportFailure(job, run, error, dead, why);
  }

  /** A job its claim made dead: its last delivery left no outcome and no attempts are left. */
  private exhausted(job: ClaimedJob, run: DrainRun): void {
    const error = new IdempotencyError(
      `nest-idempotency: job ${job.name} (${job.id}) has no attempts left; its last delivery ` +
        'recorded no outcome',
    );
    this.reportFailure(job, run, error, true, error.message);
  }

  /** Counts and reports a failed delivery; a dead job is also logged, as `why`, for a human. */
  private reportFailure(
    job: ClaimedJob,
    run: DrainRun,
    error: unknown,
    dead: boolean,
    why: string,
  ) {
    run.failed++;
    if (dead) run.dead++;
    this.events.emit({ type: 'job_failed', ...this.describe(job), dead, error });
    if (dead) this.logger.error(why);
  }

  private staged(job: ClaimedJob): StagedJob {
    const { id, name, args, key, attempt, origin } = job;
    return { id, name, args, key, attempt, origin: { scope: origin.scope, key: origin.key } };
  }

  private describe(job: ClaimedJob) {
    return { id: job.id, name: job.name, key: job.key, attempt: job.attempt };
  }
}
