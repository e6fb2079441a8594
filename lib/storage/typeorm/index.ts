/**
 * `nest-idempotency/typeorm`: the PostgreSQL store, on the application's TypeORM DataSource, with
 * its entities and migrations. A subpath of its own because it loads `typeorm` (and, through the
 * DataSource, `pg`): an application on another store never installs them.
 *
 * @module nest-idempotency/typeorm
 */
export { typeOrmStore } from './typeorm-store.factory';
export type { IdempotencyTypeOrmStoreOptions } from './typeorm-store.factory';
export { DEFAULT_TYPEORM_STORE_OPTIONS } from './typeorm-store.defaults';
export { TypeOrmIdempotencyStore } from './typeorm-idempotency.store';
export type { TypeOrmIdempotencyStoreSettings } from './typeorm-store.settings';
export { IdempotencyStoreTimeoutError } from './with-deadline';
export { isDatabaseUnavailable } from './database-unavailable';
export { IdempotencyRecordEntity } from './idempotency-record.entity';
export { IdempotencyJobEntity } from './idempotency-job.entity';
export {
  AddOperationSettingsToIdempotencyRecords1764288000000,
  AddPhasesToIdempotencyRecords1764028800000,
  AddPurgeAfterToIdempotencyRecords1764201600000,
  CreateIdempotencyRecords1732233600000,
  createIdempotencyOperationSettingsMigration,
  createIdempotencyPhasesMigration,
  createIdempotencyPurgeAfterMigration,
  createIdempotencyRecordsMigration,
} from './create-idempotency-records.migration';
