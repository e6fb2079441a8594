/**
 * `nest-idempotency/phases`: operations in phases (local and foreign steps with recovery points,
 * resumed by a retry or the completer) and the jobs their steps stage. They need a store with the
 * `operations` ability: the TypeORM store.
 *
 * @module nest-idempotency/phases
 */
export { IdempotencyOperations } from './idempotency-operations.service';
export type { AbandonedResolution } from './idempotency-operations.service';
export { IdempotencyCompleter } from './idempotency-completer.service';
export type { CompleterRunSummary } from './idempotency-completer.service';
export type { AbandonedOperation } from './operation-record.store';
export { IdempotentOperation } from './idempotent-operation.decorator';
export { defineSteps, proceed, respond, retryLater } from './operation-step';
export type {
  ForeignStepContext,
  ForeignStepOptions,
  IdempotencyOperation,
  LocalStepContext,
  LocalStepOptions,
  OperationInput,
  OperationOutput,
  OperationStep,
  OperationStepContext,
  OperationStepFactory,
  StepOutcome,
} from './operation-step';
export { IdempotencyJobs } from './jobs/idempotency-jobs.service';
export type { DrainSummary } from './jobs/idempotency-jobs.service';
export { IdempotentJobHandler } from './jobs/idempotent-job-handler.decorator';
export type {
  DeadJob,
  IdempotencyJobHandlerInstance,
  StagedJob,
} from './jobs/staged-job.interface';
export { IdempotencyPhasesModule } from './idempotency-phases.module';
export { DEFAULT_IDEMPOTENCY_PHASES_OPTIONS } from './idempotency-phases.defaults';
export type {
  IdempotencyCompleterOptions,
  IdempotencyJobsOptions,
  IdempotencyPhasesModuleOptions,
  ResolvedIdempotencyPhasesOptions,
} from './idempotency-phases.options';
