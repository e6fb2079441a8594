/**
 * `nest-idempotency`: the module, the `@Idempotent()` decorator with its guard and interceptor,
 * the storage contract with the in-memory store, events, and the errors the library answers with.
 * PostgreSQL, operations in phases, the health indicator, the client and the store conformance
 * suite live in the subpaths.
 *
 * @module nest-idempotency
 */
export { IdempotencyModule } from './module/idempotency.module';
export type { IdempotencyModuleExtras } from './config/idempotency.module-definition';
export { Idempotent } from './module/idempotent.decorator';
export { SkipIdempotency } from './decorators/skip-idempotency.decorator';
export { IdempotencyGuard } from './module/idempotency.guard';
export { IdempotencyInterceptor } from './module/idempotency.interceptor';
export { IdempotencyContext } from './context/idempotency.context';
export type { IdempotencyRequestIdentity } from './context/idempotency-identity';
export { IdempotencyEvents } from './events/idempotency.events';
export type { IdempotencyEvent, IdempotencyEventListener } from './events/idempotency.events';
export { IdempotencyPurgeService } from './purge/idempotency-purge.service';
export { DEFAULT_IDEMPOTENCY_OPTIONS } from './config/idempotency.defaults';
export {
  IDEMPOTENT_REPLAYED_HEADER,
  PROBLEM_CONTENT_TYPE,
  SHARED_SCOPE,
} from './config/idempotency.constants';
export type {
  IdempotencyModuleOptions,
  IdempotencyOptionsFactory,
  IdempotencyPurgeOptions,
  IdempotencyReplayCacheOptions,
  IdempotencyScopeResolver,
  IdempotencyRouteOptions,
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
export type { IdempotencyStoreFactory } from './storage/idempotency-store.factory';
export { MemoryIdempotencyStore } from './storage/memory-idempotency.store';
export { IdempotencyExceptionFilter } from './errors/idempotency-exception.filter';
export { IdempotencyProblemException } from './errors/idempotency-problem.exception';
export type { IdempotencyErrorCode } from './errors/idempotency-error-codes';
export type {
  IdempotencyErrorBody,
  IdempotencyErrorBodyRenderer,
  IdempotencyProblem,
} from './errors/idempotency-problem.types';
export {
  IdempotencyConfigurationError,
  IdempotencyError,
} from './config/idempotency-configuration.error';
