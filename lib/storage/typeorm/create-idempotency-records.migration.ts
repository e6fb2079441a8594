import type { MigrationInterface, QueryRunner } from 'typeorm';
import { DEFAULT_IDEMPOTENCY_OPTIONS } from '../../idempotency.defaults';
import { createIdempotencyTableSql, dropIdempotencyTableSql } from './idempotency-table.sql';

/**
 * Builds a TypeORM migration class that creates the record table for a custom `tableName`.
 *
 * @param tableName - the same value as the module's `tableName` option
 * @returns a migration class to list in your DataSource's `migrations`
 * @example
 * migrations: [createIdempotencyRecordsMigration('billing.idempotency_records')]
 */
export function createIdempotencyRecordsMigration(tableName: string): new () => MigrationInterface {
  // TypeORM records migrations by name: each table gets its own, e.g. `CreateBillingIdempotencyRecords1732233600000`.
  const name = `Create${tableName
    .split(/[._]/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('')}1732233600000`;
  const migration = class implements MigrationInterface {
    name = name;

    async up(queryRunner: QueryRunner): Promise<void> {
      for (const sql of createIdempotencyTableSql(tableName)) await queryRunner.query(sql);
    }

    async down(queryRunner: QueryRunner): Promise<void> {
      for (const sql of dropIdempotencyTableSql(tableName)) await queryRunner.query(sql);
    }
  };
  Object.defineProperty(migration, 'name', { value: name });
  return migration;
}

/**
 * Migration that creates `idempotency_records` (the default table) and its expiry index.
 * @example
 * TypeOrmModule.forRoot({ type: 'postgres', migrations: [CreateIdempotencyRecords1732233600000], migrationsRun: true })
 */
export const CreateIdempotencyRecords1732233600000 = createIdempotencyRecordsMigration(
  DEFAULT_IDEMPOTENCY_OPTIONS.tableName,
);
