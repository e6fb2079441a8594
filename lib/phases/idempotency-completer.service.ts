import { Inject, Injectable, Logger } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { idempotencyRunScopes } from '../context/idempotency-run-scope';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IdempotencyRun } from '../execution/idempotency-run';
import type { OperationRunResult } from '../execution/idempotency-run';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { PeriodicTask } from '../scheduling/periodic-task';
import { IdempotencyStore } from '../storage/idempotency.store';
import { OperationRunner } from './operation-runner';
import type { OperationRecordRow } from './operation-record.store';
import { IdempotencyOperationRegistry } from './operation-registry';
import { abandonedEvent } from './operation-events';
import type { ResolvedIdempotencyPhasesOptions } from './idempotency-phases.options';
import { IDEMPOTENCY_PHASES_OPTIONS } from './idempotency-phases.tokens';

/** What one completer run did. */
export interface CompleterRunSummary {
  /** Unfinished operations taken over and run. */
  taken: number;
  /** Of those, how many finished (their response is now replayed). */
  completed: number;
  /** Operations marked abandoned for being older than `maxAgeSeconds`. */
  abandoned: number;
}

/**
 * Finishes operations in phases whose clients gave up (docs/design/contract.md#operations-in-phases). On a schedule it takes over
 * unfinished records nobody runs — lease lapsed or released, last run at least
 * `completer.afterSeconds` ago — with the same compare-and-set takeover a retry uses, and runs
 * them through their registered operation from their recovery point, with their stored input.
 * Records older than `maxAgeSeconds` are never run: they are marked abandoned (an
 * `operation_abandoned` event, and `IdempotencyOperations.listAbandoned()`). Safe on many
 * instances: candidates are taken with `FOR UPDATE SKIP LOCKED`.
 */
@Injectable()
export class IdempotencyCompleter implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyCompleter');
  private readonly task = new PeriodicTask('completer', () => this.runAll());

  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly runner: OperationRunner,
    private readonly registry: IdempotencyOperationRegistry,
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_PHASES_OPTIONS) private readonly phases: ResolvedIdempotencyPhasesOptions,
  ) {}

  /**
   * Runs the completer now (or joins the run under way): one batch of abandonments and one
   * batch of takeovers.
   * @throws when the store is unreachable
   */
  completeStale(): Promise<CompleterRunSummary> {
    return this.task.run();
  }

  /** @inheritDoc */
  async onApplicationBootstrap(): Promise<void> {
    const { enabled, intervalSeconds } = this.phases.completer;
    if (!enabled || !this.runner.operations || !this.registry.discover().operations.size) return;
    await this.task.start(intervalSeconds, this.moduleRef, (error) => {
      this.events.emit({ type: 'store_error', operation: 'completer', error });
      this.logger.warn(`Completer run failed: ${(error as Error).message}`);
    });
  }

  /** @inheritDoc */
  onApplicationShutdown(): void {
    this.task.stop();
  }

  private async runAll(): Promise<CompleterRunSummary> {
    const operations = this.runner.operations;
    if (!operations) return { taken: 0, completed: 0, abandoned: 0 };
    const { lockTimeoutSeconds } = this.options;
    const { completer, maxAgeSeconds } = this.phases;
    const abandoned = await operations.abandonOld(completer.batchSize, maxAgeSeconds);
    for (const row of abandoned) this.events.emit(abandonedEvent(row, 'max_age'));
    const claimedAt = Date.now();
    const taken = await operations.takeOver(
      completer.batchSize,
      completer.afterSeconds,
      maxAgeSeconds,
      lockTimeoutSeconds,
    );
    let completed = 0;
    // Every lease taken is renewed from now on, while the records are run one after another.
    const runs = taken.map((row) => this.begin(row, claimedAt));
    for (const [index, row] of taken.entries()) {
      const outcome = await this.complete(row, runs[index]);
      if (outcome === 'completed') completed++;
      const { scope, key, operation } = row;
      this.events.emit({
        type: 'operation_completed_by_completer',
        scope,
        key,
        operation,
        outcome,
      });
    }
    return { taken: taken.length, completed, abandoned: abandoned.length };
  }

  /**
   * Begins the run of a record just taken over, as a request begins one: its lease renewed
   * from `claimedAt`, its completion the operation's, with the settings of the route that
   * started it (the module's for records older than those settings).
   */
  private begin(row: OperationRecordRow, claimedAt: number): IdempotencyRun {
    const { lockTimeoutSeconds, maxLockHoldSeconds } = this.options;
    const { scope, key } = row;
    return IdempotencyRun.begin({
      store: this.store,
      ref: { scope, key, ownerToken: row.ownerToken! },
      identity: { scope, key, recordId: row.recordId, attempt: row.attempt },
      settings: row.settings ?? this.options,
      completion: 'operation',
      lockTimeoutSeconds,
      maxLockHoldSeconds,
      claimedAt,
      onLost: () =>
        this.logger.warn(`Lost the lease of an operation it was completing (${row.operation})`),
      onError: (error) => this.events.emit({ type: 'store_error', operation: 'renew', error }),
    });
  }

  private async complete(
    row: OperationRecordRow,
    run: IdempotencyRun,
  ): Promise<OperationRunResult['kind'] | 'failed'> {
    // Steps (and services they call) reach the run through IdempotencyContext, as in a request;
    // the stored input is used.
    const scope = { run, handlerStarted: false };
    try {
      const operation = this.registry.discover().operations.get(row.operation);
      if (!operation) throw new Error(`no operation "${row.operation}" is registered`);
      const result = await idempotencyRunScopes.run(scope, () =>
        run.operate(() => this.runner.run(operation, null, run)),
      );
      return result.kind;
    } catch (error) {
      this.logger.error(
        `Could not complete operation "${row.operation}"; it is retried after ` +
          `${this.phases.completer.afterSeconds} s`,
        error as Error,
      );
      // Released at its recovery point, as a request's failed operation is.
      await this.store.release(run.ref, 'retry').catch(() => undefined);
      return 'failed';
    } finally {
      idempotencyRunScopes.end(scope);
      run.lease.stop();
    }
  }
}
