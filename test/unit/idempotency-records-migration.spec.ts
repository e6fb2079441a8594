/**
 * The shipped migration refuses a DataSource that is not PostgreSQL before it runs a statement,
 * with the library's own message, instead of failing on its DDL with another database's syntax
 * error. (No other TypeORM driver is installed here, so the QueryRunner is a fake that records
 * what it is asked to run.)
 */
import type { QueryRunner } from 'typeorm';
import { IdempotencyConfigurationError } from '../../lib/config/idempotency-configuration.error';
import {
  AddOperationSettingsToIdempotencyRecords1764288000000,
  CreateIdempotencyRecords1732233600000,
  createIdempotencyRecordsMigration,
} from '../../lib/storage/typeorm/create-idempotency-records.migration';

function fakeQueryRunner(type: string): { runner: QueryRunner; queries: string[] } {
  const queries: string[] = [];
  const runner = {
    connection: { options: { type } },
    query: async (sql: string) => {
      queries.push(sql);
      return [];
    },
  } as unknown as QueryRunner;
  return { runner, queries };
}

const migrations = [
  ['CreateIdempotencyRecords1732233600000', CreateIdempotencyRecords1732233600000],
  ['billing.idempotency_records', createIdempotencyRecordsMigration('billing.idempotency_records')],
] as const;

describe('migration AddOperationSettingsToIdempotencyRecords1764288000000', () => {
  it('refuses a mysql DataSource in up() and down() before any statement', async () => {
    const { runner, queries } = fakeQueryRunner('mysql');
    for (const direction of ['up', 'down'] as const) {
      await expect(
        new AddOperationSettingsToIdempotencyRecords1764288000000()[direction](runner),
      ).rejects.toBeInstanceOf(IdempotencyConfigurationError);
    }
    expect(queries).toEqual([]);
  });

  it('only adds a nullable column (an expand step the previous release never notices)', async () => {
    const { runner, queries } = fakeQueryRunner('postgres');
    await new AddOperationSettingsToIdempotencyRecords1764288000000().up(runner);
    expect(queries).toEqual([
      'ALTER TABLE "idempotency_records" ADD COLUMN IF NOT EXISTS "operation_settings" jsonb',
    ]);
  });
});

describe.each(migrations)('migration %s', (_, Migration) => {
  it.each(['mysql', 'better-sqlite3', 'sqljs', 'cockroachdb', 'aurora-postgres'])(
    'refuses a %s DataSource in up() and down() before any statement',
    async (type) => {
      const { runner, queries } = fakeQueryRunner(type);
      for (const direction of ['up', 'down'] as const) {
        const error = await new Migration()[direction](runner).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(IdempotencyConfigurationError);
        expect((error as Error).message).toBe(
          `nest-idempotency: the TypeORM store needs a PostgreSQL DataSource (type "postgres"); got "${type}".`,
        );
      }
      expect(queries).toEqual([]);
    },
  );

  it('runs its DDL on a postgres DataSource', async () => {
    const { runner, queries } = fakeQueryRunner('postgres');
    await new Migration().up(runner);
    expect(queries.some((sql) => sql.startsWith('CREATE TABLE IF NOT EXISTS'))).toBe(true);
    const before = queries.length;
    await new Migration().down(runner);
    expect(
      queries
        .slice(before)
        .some((sql) => /^DROP TABLE IF EXISTS .*"idempotency_records"$/.test(sql)),
    ).toBe(true);
  });
});
