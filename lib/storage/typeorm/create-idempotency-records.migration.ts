import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyConfigurationError } from '../../errors/idempotency-configuration.error';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../idempotency.defaults';
import {
  addIdempotencyPhasesSql,
  createIdempotencyTableSql,
  dropIdempotencyTableSql,
  quoteTableName,
  schemaOf,
} from './idempotency-table.sql';

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
 * Builds a TypeORM migration class that creates the record table for a custom `tableName`,
 * with its staged-jobs table `<tableName>_jobs` (SPEC §8).
 * For a schema-qualified name it creates the schema too when it does not exist (and leaves an
 * existing one alone, so a role without `CREATE` on the database can use a schema made for it).
 * `down()` drops the table, never the schema.
 *
 * @param tableName - the same value as the module's `tableName` option
 * @returns a migration class to list in your DataSource's `migrations`
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL (type `"postgres"`), before any statement runs
 * @example
 * migrations: [createIdempotencyRecordsMigration('billing.idempotency_records')]
 */
export function createIdempotencyRecordsMigration(tableName: string): new () => MigrationInterface {
  // TypeORM records migrations by name: each table gets its own, e.g. `CreateBillingIdempotencyRecords1732233600000`.
  const name = `Create${pascalCase(tableName)}1732233600000`;
  const schema = schemaOf(tableName);
  const migration = class implements MigrationInterface {
    name = name;

    async up(queryRunner: QueryRunner): Promise<void> {
      assertPostgres(queryRunner);
      if (schema !== undefined) {
        // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
        const found: unknown[] = await queryRunner.query(
          'SELECT 1 FROM pg_namespace WHERE nspname = $1',
          [schema],
        );
        if (found.length === 0) {
          await queryRunner.query(`CREATE SCHEMA IF NOT EXISTS ${quoteTableName(schema)}`);
        }
      }
      for (const sql of createIdempotencyTableSql(tableName)) await queryRunner.query(sql);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      assertPostgres(queryRunner);
      for (const sql of dropIdempotencyTableSql(tableName)) await queryRunner.query(sql);
    }
  };
  Object.defineProperty(migration, 'name', { value: name });
  return migration;
}

/**
 * Migration that creates `idempotency_records` (the default table) and its expiry index.
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL
 * @example
 * TypeOrmModule.forRoot({ type: 'postgres', migrations: [CreateIdempotencyRecords1732233600000], migrationsRun: true })
 */
export const CreateIdempotencyRecords1732233600000 = createIdempotencyRecordsMigration(
  DEFAULT_IDEMPOTENCY_OPTIONS.tableName,
);

/**
 * Builds the migration that upgrades a record table created before operations in phases
 * (SPEC §8): it adds the phase columns, the `abandoned` status, an index and the jobs table
 * `<tableName>_jobs`. Idempotent: on a table the current create migration made it changes
 * nothing, so listing both is safe. `down()` drops the jobs table only (the added columns stay:
 * dropping them would strand operations in flight).
 *
 * @param tableName - the same value as the module's `tableName` option
 * @returns a migration class to list after the create migration
 * @throws IdempotencyConfigurationError from `up()` and `down()` when the DataSource is not
 *   PostgreSQL, before any statement runs
 */
export function createIdempotencyPhasesMigration(tableName: string): new () => MigrationInterface {
  const name = `AddPhasesTo${pascalCase(tableName)}1764028800000`;
  const migration = class implements MigrationInterface {
    name = name;

    async up(queryRunner: QueryRunner): Promise<void> {
      assertPostgres(queryRunner);
      for (const sql of addIdempotencyPhasesSql(tableName)) await queryRunner.query(sql);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      assertPostgres(queryRunner);
      await queryRunner.query(`DROP TABLE IF EXISTS ${quoteTableName(`${tableName}_jobs`)}`);
    }
  };
  Object.defineProperty(migration, 'name', { value: name });
  return migration;
}

/**
 * Upgrade of the default table for applications that ran `CreateIdempotencyRecords1732233600000`
 * before operations in phases existed. New applications do not need it (harmless if listed).
 * @example
 * migrations: [CreateIdempotencyRecords1732233600000, AddPhasesToIdempotencyRecords1764028800000]
 */
export const AddPhasesToIdempotencyRecords1764028800000 = createIdempotencyPhasesMigration(
  DEFAULT_IDEMPOTENCY_OPTIONS.tableName,
);
