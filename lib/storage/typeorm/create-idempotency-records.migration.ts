import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IdempotencyConfigurationError } from '../../errors/idempotency-configuration.error';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../idempotency.defaults';
import {
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

/**
 * Builds a TypeORM migration class that creates the record table for a custom `tableName`.
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
  const name = `Create${tableName
    .split(/[._]/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')}1732233600000`;
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
