import { Inject, Injectable } from '@nestjs/common';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS } from '../idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { IdempotencyStore } from '../storage/idempotency.store';
import { LocalFirstIdempotencyStore } from '../storage/local-first-idempotency.store';
import { TypeOrmIdempotencyStore } from '../storage/typeorm/typeorm-idempotency.store';
import { TypeOrmJobStore } from '../storage/typeorm/typeorm-job.store';
import { TypeOrmPhaseStore } from '../storage/typeorm/typeorm-phase.store';
import { OperationRunner } from './operation-runner';

/** The stores and the runner of operations in phases, on the module's TypeORM store. */
export interface PhaseEngineParts {
  phases: TypeOrmPhaseStore;
  jobs: TypeOrmJobStore;
  runner: OperationRunner;
}

/**
 * Builds the parts of operations in phases when the module's store is the TypeORM store (they
 * need PostgreSQL transactions); with another store there are none. Internal.
 */
@Injectable()
export class IdempotencyPhaseEngine {
  /** Undefined when the store is not the TypeORM store. */
  readonly parts: PhaseEngineParts | undefined;

  constructor(
    store: IdempotencyStore,
    events: IdempotencyEvents,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
  ) {
    const deciding = store instanceof LocalFirstIdempotencyStore ? store.inner : store;
    if (!(deciding instanceof TypeOrmIdempotencyStore)) return;
    const phases = new TypeOrmPhaseStore(deciding, options.tableName);
    const jobs = new TypeOrmJobStore(deciding, options.tableName);
    this.parts = {
      phases,
      jobs,
      runner: new OperationRunner(store, phases, jobs, events, options),
    };
  }
}
