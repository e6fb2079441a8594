import { Inject, Injectable, Logger } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { idempotencyRequestStorage } from '../context/idempotency-request-state';
import { IdempotencyEvents } from '../events/idempotency.events';
import { LeaseHeartbeat } from '../execution/lease-heartbeat';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { PeriodicTask } from '../scheduling/periodic-task';
import { IdempotencyStore } from '../storage/idempotency.store';
import type { OperationRecordRow } from '../storage/typeorm/typeorm-phase.store';
import { IdempotencyPhaseEngine } from './idempotency-phase-engine';
import type { PhaseEngineParts } from './idempotency-phase-engine';
import type { OperationRunResult } from './operation-runner';
import { IdempotencyOperationRegistry } from './operation-registry';

/** What one completer run did. */
export interface CompleterRunSummary {
  /** Unfinished operations taken over and run. */
  taken: number;
  /** Of those, how many finished (their response is now replayed). */
  completed: number;
  /** Operations marked abandoned for being older than `phases.maxAgeSeconds`. */
  abandoned: number;
}

/**
 * Finishes operations in phases whose clients gave up (SPEC §8). On a schedule it takes over
 * unfinished records nobody runs — lease lapsed or released, last run at least
 * `completer.afterSeconds` ago — with the same compare-and-set takeover a retry uses, and runs
 * them through their registered operation from their recovery point, with their stored input.
 * Records older than `phases.maxAgeSeconds` are never run: they are marked abandoned (an
 * `operation_abandoned` event, and `IdempotentOperations.listAbandoned()`). Safe on many
 * instances: candidates are taken with `FOR UPDATE SKIP LOCKED`.
 */
@Injectable()
export class IdempotencyCompleter implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyCompleter');
  private readonly task = new PeriodicTask('completer', () => this.runAll());

  constructor(
    private readonly engine: IdempotencyPhaseEngine,
    private readonly registry: IdempotencyOperationRegistry,
    private readonly store: IdempotencyStore,
    private readonly events: IdempotencyEvents,
    private readonly moduleRef: ModuleRef,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
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
    const { enabled, intervalSeconds } = this.options.completer;
    if (!enabled || !this.engine.parts || !this.registry.hasOperations()) return;
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
    const parts = this.engine.parts;
    if (!parts) return { taken: 0, completed: 0, abandoned: 0 };
    const { completer, phases, lockTimeoutSeconds } = this.options;
    const abandoned = await parts.phases.abandonOld(completer.batchSize, phases.maxAgeSeconds);
    for (const row of abandoned) {
      this.events.emit({
        type: 'operation_abandoned',
        scope: row.scope,
        key: row.key,
        operation: row.operation,
        recoveryPoint: row.recoveryPoint,
        reason: 'max_age',
      });
    }
    const claimedAt = Date.now();
    const taken = await parts.phases.takeOver(
      completer.batchSize,
      completer.afterSeconds,
      phases.maxAgeSeconds,
      lockTimeoutSeconds,
    );
    let completed = 0;
    // Every lease taken is renewed from now on, while the records are run one after another.
    const leases = taken.map((row) => this.leaseOf(row, claimedAt));
    for (const [index, row] of taken.entries()) {
      const outcome = await this.complete(parts, row, leases[index]);
      if (outcome === 'completed') completed++;
      this.events.emit({
        type: 'operation_completed_by_completer',
        scope: row.scope,
        key: row.key,
        operation: row.operation,
        outcome,
      });
    }
    return { taken: taken.length, completed, abandoned: abandoned.length };
  }

  private refOf(row: OperationRecordRow) {
    return { scope: row.scope, key: row.key, ownerToken: row.ownerToken! };
  }

  private leaseOf(row: OperationRecordRow, claimedAt: number): LeaseHeartbeat {
    const { lockTimeoutSeconds, maxLockHoldSeconds } = this.options;
    const lease = new LeaseHeartbeat(
      this.store,
      this.refOf(row),
      lockTimeoutSeconds,
      maxLockHoldSeconds,
      () => this.logger.warn(`Lost the lease of an operation it was completing (${row.operation})`),
      (error) => this.events.emit({ type: 'store_error', operation: 'renew', error }),
    );
    lease.start(claimedAt);
    return lease;
  }

  private async complete(
    parts: PhaseEngineParts,
    row: OperationRecordRow,
    lease: LeaseHeartbeat,
  ): Promise<OperationRunResult['kind'] | 'failed'> {
    const ref = this.refOf(row);
    const { ttlSeconds, replayHeaders } = this.options;
    const identity = {
      scope: row.scope,
      key: row.key,
      recordId: row.recordId,
      attempt: row.attempt,
    };
    // Steps (and services they call) read the request's identity as they would in a request.
    const state = {
      ...identity,
      fingerprint: '',
      handlerStarted: true,
      operationRun: { ref, lease, ttlSeconds, replayHeaders, transactional: false },
    };
    try {
      const operation = this.registry.findOperation(row.operation);
      if (!operation) throw new Error(`no operation "${row.operation}" is registered`);
      const result = await idempotencyRequestStorage.run(state, () =>
        // The stored input is used: the completer has no request.
        parts.runner.run(operation, null, { ref, lease, identity, ttlSeconds, replayHeaders }),
      );
      return result.kind;
    } catch (error) {
      this.logger.error(
        `Could not complete operation "${row.operation}"; it is retried after ` +
          `${this.options.completer.afterSeconds} s`,
        error as Error,
      );
      await this.store.release(ref, 'retry').catch(() => undefined);
      return 'failed';
    } finally {
      lease.stop();
    }
  }
}
