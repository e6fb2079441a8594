import { Inject, Injectable } from '@nestjs/common';
import { IdempotencyEvents } from '../events/idempotency.events';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { IdempotencyStore } from '../storage/idempotency.store';
import type { IdempotencyStoreCapabilities } from '../storage/idempotency-store.capabilities';
import type { OperationRecordStore } from './operation-record.store';
import { OperationRunner } from './operation-runner';
import type { ResolvedIdempotencyPhasesOptions } from './idempotency-phases.options';
import { IDEMPOTENCY_PHASES_OPTIONS } from './idempotency-phases.tokens';

/** The store ability of operations in phases, and their runner. */
export interface PhaseEngineParts {
  operations: OperationRecordStore;
  runner: OperationRunner;
}

/**
 * Builds the runner of operations in phases when the store has the `operations` ability (the
 * TypeORM store: they need PostgreSQL transactions); with another store there is none. Internal.
 */
@Injectable()
export class IdempotencyPhaseEngine {
  /** Undefined when the store cannot run operations in phases. */
  readonly parts: PhaseEngineParts | undefined;

  constructor(
    store: IdempotencyStore,
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES) capabilities: IdempotencyStoreCapabilities,
    events: IdempotencyEvents,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_PHASES_OPTIONS) phases: ResolvedIdempotencyPhasesOptions,
  ) {
    const { operations } = capabilities;
    if (!operations) return;
    this.parts = {
      operations,
      runner: new OperationRunner(operations, store, events, options, phases),
    };
  }
}
