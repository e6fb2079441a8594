export { IdempotencyModule } from './idempotency.module';
export type { IdempotencyModuleExtras } from './idempotency.module-definition';
export { Idempotent } from './decorators/idempotent.decorator';
export { SkipIdempotency } from './decorators/skip-idempotency.decorator';
export { IdempotencyGuard } from './idempotency.guard';
export { IdempotencyInterceptor } from './idempotency.interceptor';
export { IdempotencyContext } from './context/idempotency.context';
export type { IdempotencyRequestIdentity } from './context/idempotency-identity';
export { IdempotencyEvents } from './events/idempotency.events';
export type { IdempotencyEvent, IdempotencyEventListener } from './events/idempotency.events';
export {
  IdempotencyPurgeService,
  IDEMPOTENCY_PURGE_INTERVAL,
} from './purge/idempotency-purge.service';
export { DEFAULT_IDEMPOTENCY_OPTIONS, resolveIdempotencyOptions } from './idempotency.defaults';
export { IDEMPOTENCY_OPTIONS } from './idempotency.tokens';
export { IDEMPOTENT_REPLAYED_HEADER, PROBLEM_CONTENT_TYPE } from './idempotency.constants';
export type {
  IdempotencyModuleOptions,
  IdempotencyOptionsFactory,
  IdempotencyCompleterOptions,
  IdempotencyJobsOptions,
  IdempotencyPhasesOptions,
  IdempotencyPurgeOptions,
  IdempotencyReplayCacheOptions,
  IdempotencyRouteOptions,
  IdempotencyScopeResolver,
  IdempotentOptions,
  ResolvedIdempotencyOptions,
} from './interfaces/idempotency-module-options.interface';
export type {
  ClaimRequest,
  ClaimResult,
  IdempotencyRecordRef,
  IdempotencyRecordStatus,
  IdempotencyStoreTransaction,
  StoredResponse,
} from './interfaces/idempotency-record.interface';
export { IdempotencyStore } from './storage/idempotency.store';
export { MemoryIdempotencyStore } from './storage/memory-idempotency.store';
export { TypeOrmIdempotencyStore } from './storage/typeorm/typeorm-idempotency.store';
export type { TypeOrmIdempotencyStoreSettings } from './storage/typeorm/typeorm-idempotency.store';
export { IdempotencyStoreTimeoutError } from './storage/typeorm/with-deadline';
export { isDatabaseUnavailable } from './storage/typeorm/database-unavailable';
export { IdempotencyRecordEntity } from './storage/typeorm/idempotency-record.entity';
export { IdempotencyJobEntity } from './storage/typeorm/idempotency-job.entity';
export {
  AddOperationSettingsToIdempotencyRecords1764288000000,
  AddPhasesToIdempotencyRecords1764028800000,
  AddPurgeAfterToIdempotencyRecords1764201600000,
  CreateIdempotencyRecords1732233600000,
  createIdempotencyOperationSettingsMigration,
  createIdempotencyPhasesMigration,
  createIdempotencyPurgeAfterMigration,
  createIdempotencyRecordsMigration,
} from './storage/typeorm/create-idempotency-records.migration';
export { IdempotencyExceptionFilter } from './errors/idempotency-exception.filter';
export { IdempotencyProblemException } from './errors/idempotency-problem.exception';
export type {
  IdempotencyErrorBody,
  IdempotencyErrorBodyRenderer,
  IdempotencyErrorCode,
  IdempotencyProblem,
} from './errors/idempotency-problem.exception';
export {
  IdempotencyConfigurationError,
  IdempotencyError,
} from './errors/idempotency-configuration.error';
export { IdempotentOperations } from './phases/idempotent-operations.service';
export type { AbandonedResolution } from './phases/idempotent-operations.service';
export { IdempotencyCompleter } from './phases/idempotency-completer.service';
export type { CompleterRunSummary } from './phases/idempotency-completer.service';
export type { AbandonedOperation } from './phases/operation-record.store';
export { IdempotencyJobs } from './jobs/idempotency-jobs.service';
export type { DrainSummary } from './jobs/idempotency-jobs.service';
export { IdempotentOperation } from './phases/idempotent-operation.decorator';
export { localStep, foreignStep, proceed, respond, retryLater } from './phases/operation-step';
export type {
  ForeignStepContext,
  ForeignStepOptions,
  IdempotencyOperation,
  LocalStepContext,
  LocalStepOptions,
  OperationStep,
  OperationStepContext,
  StepOutcome,
} from './phases/operation-step';
export { IdempotencyJobHandler } from './jobs/idempotency-job-handler.decorator';
export type {
  DeadJob,
  IdempotencyJobHandlerInstance,
  StagedJob,
} from './jobs/staged-job.interface';
