import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';
import {
  addIdempotencyOperationSettingsSql,
  addIdempotencyPhasesSql,
  addIdempotencyPurgeAfterSql,
  createIdempotencyTableSql,
  createSchemaSql,
  dropIdempotencyTableSql,
  dropJobsTableSql,
  dropOperationSettingsSql,
  SCHEMA_EXISTS_SQL,
  schemaOf,
} from './idempotency-table.sql';
import { DEFAULT_TYPEORM_STORE_OPTIONS } from './typeorm-store.defaults';

const DEFAULT_TABLE_NAME = DEFAULT_TYPEORM_STORE_OPTIONS.tableName;

/**
 * Refuses to run on anything but PostgreSQL, before any statement: the DDL is PostgreSQL's, and
 * on another database it would fail with a syntax error that does not say why.
 * CockroachDB and Aurora PostgreSQL are refused too: the library is not tested on them, and the
 * store refuses them at bootstrap.
 */
function assertPostgres(queryRunner: QueryRunner): void {
  const type = String(queryRunner.connection.options.type);
  if (type !== 'postgres') throw IdempotencyConfigurationError.unsupportedDatabase(type);
}

function pascalCase(tableName: string): string {
  return tableName
    .split(/[._]/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

/**
 * A migration class named `name` (TypeORM records migrations by their name) whose `up()` and
 * `down()` refuse a DataSource that is not PostgreSQL before running a statement, then run their
 * statements one after another. Without `down` statements, `down()` does nothing.
 * @param before - what `up()` does before its statements
 */
function postgresMigration(
  name: string,
  up: string[],
  down: string[] = [],
  before?: (queryRunner: QueryRunner) => Promise<void>,
): new () => MigrationInterface {
  const migration = class implements MigrationInterface {
    name = name;

    async up(queryRunner: QueryRunner): Promise<void> {
      assertPostgres(queryRunner);
      await before?.(queryRunner);
      for (const sql of up) await queryRunner.query(sql);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      if (down.length === 0) return;
      assertPostgres(queryRunner);
      for (const sql of down) await queryRunner.query(sql);
    }
  };
  Object.defineProperty(migration, 'name', { value: name });
  return migration;
}

/**
 * Builds a TypeORM migration class that creates the record table for a custom `tableName`,
 * with its staged-jobs table `<tableName>_jobs` (docs/design/contract.md#operations-in-phases).
 * For a schema-qualified name it creates the schema too when it does not exist (and leaves an
 * existing one alone, so a role without `CREATE` on the database can use a schema made for it).
 * `down()` drops the table, never the schema.
 *
 * @param tableName - the same value as `typeOrmStore({ tableName })`
 * @returns a migration class to list in your DataSource's `migrations`
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL (type `"postgres"`), before any statement runs
 * @example
 * migrations: [createIdempotencyRecordsMigration('billing.idempotency_records')]
 */
export function createIdempotencyRecordsMigration(tableName: string): new () => MigrationInterface {
  // TypeORM records migrations by name: each table gets its own, e.g. `CreateBillingIdempotencyRecords1732233600000`.
  const schema = schemaOf(tableName);
  return postgresMigration(
    `Create${pascalCase(tableName)}1732233600000`,
    createIdempotencyTableSql(tableName),
    dropIdempotencyTableSql(tableName),
    async (queryRunner) => {
      if (schema === undefined) return;
      // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
      const found: unknown[] = await queryRunner.query(SCHEMA_EXISTS_SQL, [schema]);
      if (found.length === 0) await queryRunner.query(createSchemaSql(schema));
    },
  );
}

/**
 * Migration that creates `idempotency_records` (the default table), its indexes and its jobs table.
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL
 * @example
 * TypeOrmModule.forRoot({ type: 'postgres', migrations: [CreateIdempotencyRecords1732233600000], migrationsRun: true })
 * @class
 */
export const CreateIdempotencyRecords1732233600000 =
  createIdempotencyRecordsMigration(DEFAULT_TABLE_NAME);

/**
 * Builds the migration that upgrades a record table created before operations in phases
 * (docs/design/contract.md#operations-in-phases): it adds the phase columns, the `abandoned` status, an index and the jobs table
 * `<tableName>_jobs`. Idempotent: on a table the current create migration made it changes
 * nothing, so listing both is safe. `down()` drops the jobs table only (the added columns stay:
 * dropping them would strand operations in flight).
 *
 * @param tableName - the same value as `typeOrmStore({ tableName })`
 * @returns a migration class to list after the create migration
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL, before any statement runs
 */
export function createIdempotencyPhasesMigration(tableName: string): new () => MigrationInterface {
  return postgresMigration(
    `AddPhasesTo${pascalCase(tableName)}1764028800000`,
    addIdempotencyPhasesSql(tableName),
    dropJobsTableSql(tableName),
  );
}

/**
 * Upgrade of the default table for applications that ran `CreateIdempotencyRecords1732233600000`
 * before operations in phases existed. New applications do not need it (harmless if listed).
 * @example
 * migrations: [CreateIdempotencyRecords1732233600000, AddPhasesToIdempotencyRecords1764028800000]
 * @class
 */
export const AddPhasesToIdempotencyRecords1764028800000 =
  createIdempotencyPhasesMigration(DEFAULT_TABLE_NAME);

/**
 * Builds the migration that lets a plain route's completion be a HOT update on a record table
 * made before it could be (BENCHMARKS.md): it adds `purge_after` (the claim's time
 * plus the TTL, filled from `expires_at` for existing rows) with its index in place of the index
 * on `expires_at`, makes the unfinished-operations index without `status` in its predicate, and
 * sets the table's fillfactor. An expand step: instances of the release before it keep serving
 * on the migrated table during a rolling upgrade, because triggers write `purge_after` for their
 * statements (which never name it), so their new keys are claimed and the purge still deletes
 * their rows once expired. Idempotent, so listing it is always safe. Its backfill rewrites every
 * row once. `down()` does nothing: the library of this version needs the column.
 *
 * @param tableName - the same value as `typeOrmStore({ tableName })`
 * @returns a migration class to list after the create (and phases) migrations
 * @throws IdempotencyConfigurationError from `up()` when the DataSource is not PostgreSQL,
 *   before any statement runs
 */
export function createIdempotencyPurgeAfterMigration(
  tableName: string,
): new () => MigrationInterface {
  // No down(): nothing to undo would leave a table this version of the library can use.
  return postgresMigration(
    `AddPurgeAfterTo${pascalCase(tableName)}1764201600000`,
    addIdempotencyPurgeAfterSql(tableName),
  );
}

/**
 * Upgrade of the default table for applications that ran `CreateIdempotencyRecords1732233600000`
 * before `purge_after` existed. New applications do not need it (harmless if listed).
 * @example
 * migrations: [
 *   CreateIdempotencyRecords1732233600000,
 *   AddPhasesToIdempotencyRecords1764028800000,
 *   AddPurgeAfterToIdempotencyRecords1764201600000,
 * ]
 * @class
 */
export const AddPurgeAfterToIdempotencyRecords1764201600000 =
  createIdempotencyPurgeAfterMigration(DEFAULT_TABLE_NAME);

/**
 * Builds the migration that adds `operation_settings` (the settings of the route that started
 * an operation in phases, which the background completer answers with) to a record table made
 * before it. An expand step: a nullable column the previous release never names. Idempotent,
 * so listing it is always safe. `down()` drops the column.
 *
 * @param tableName - the same value as `typeOrmStore({ tableName })`
 * @returns a migration class to list after the create, phases and purge_after migrations
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL, before any statement runs
 */
export function createIdempotencyOperationSettingsMigration(
  tableName: string,
): new () => MigrationInterface {
  return postgresMigration(
    `AddOperationSettingsTo${pascalCase(tableName)}1764288000000`,
    addIdempotencyOperationSettingsSql(tableName),
    dropOperationSettingsSql(tableName),
  );
}

/**
 * Upgrade of the default table for applications that ran `CreateIdempotencyRecords1732233600000`
 * before `operation_settings` existed. New applications do not need it (harmless if listed).
 * @example
 * migrations: [
 *   CreateIdempotencyRecords1732233600000,
 *   AddPhasesToIdempotencyRecords1764028800000,
 *   AddPurgeAfterToIdempotencyRecords1764201600000,
 *   AddOperationSettingsToIdempotencyRecords1764288000000,
 * ]
 * @class
 */
export const AddOperationSettingsToIdempotencyRecords1764288000000 =
  createIdempotencyOperationSettingsMigration(DEFAULT_TABLE_NAME);
