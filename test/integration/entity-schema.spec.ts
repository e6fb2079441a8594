/**
 * IdempotencyRecordEntity, IdempotencyJobEntity and the shipped migration describe the same
 * tables, so an application that lists the entities and runs `synchronize` or
 * `migration:generate` changes nothing in the tables the migration made (it used to drop the
 * status check), and one that lets `synchronize` make them gets every table the library needs
 * (it used to get no jobs table, and the store blamed a table "made before operations in
 * phases"). When a part is missing, the store names it and what adds it. Compared two ways on real
 * PostgreSQL: TypeORM's own schema diff on a migrated database, and the catalogs of a migrated
 * table and a synchronized one. Also for a schema-qualified table, whose migration creates its
 * schema when it is missing and leaves an existing one alone.
 */
import { DataSource, Entity } from 'typeorm';
import type { DataSourceOptions, MigrationInterface } from 'typeorm';
import {
  AddOperationSettingsToIdempotencyRecords1764288000000,
  AddPhasesToIdempotencyRecords1764028800000,
  AddPurgeAfterToIdempotencyRecords1764201600000,
  CreateIdempotencyRecords1732233600000,
  createIdempotencyPurgeAfterMigration,
  createIdempotencyRecordsMigration,
} from '../../lib/storage/typeorm/create-idempotency-records.migration';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm/typeorm-idempotency.store';
import { IdempotencyJobEntity } from '../../lib/storage/typeorm/idempotency-job.entity';
import { IdempotencyRecordEntity } from '../../lib/storage/typeorm/idempotency-record.entity';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';

/** The entity in another schema, as the README suggests for `billing.idempotency_records`. */
@Entity({ schema: 'billing', name: 'idempotency_records' })
class BillingIdempotencyRecordEntity extends IdempotencyRecordEntity {}

/** Both of the library's entities, as an application using `synchronize` lists them. */
const ENTITIES = [IdempotencyRecordEntity, IdempotencyJobEntity];

/** What `verify()` (the module's bootstrap check) says about the database at `url`. */
function verifyError(url: string): Promise<string | undefined> {
  return withDataSource(url, {}, async (dataSource) => {
    const store = new TypeOrmIdempotencyStore(dataSource, 'idempotency_records');
    return store.verify().then(
      () => undefined,
      (error: Error) => error.message,
    );
  });
}

let db: TestDatabase;

/** A database where the default migration ran. */
beforeAll(async () => {
  db = await createTestDatabase();
  await migrate(db.url, CreateIdempotencyRecords1732233600000);
});

afterAll(async () => {
  await db?.drop();
});

async function withDataSource<T>(
  url: string,
  options: Partial<DataSourceOptions>,
  use: (dataSource: DataSource) => Promise<T>,
): Promise<T> {
  const dataSource = new DataSource({ type: 'postgres', url, ...options } as DataSourceOptions);
  await dataSource.initialize();
  try {
    return await use(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

function migrate(url: string, migration: new () => MigrationInterface): Promise<void> {
  return withDataSource(
    url,
    { migrations: [migration], migrationsRun: true, migrationsTableName: `m_${migration.name}` },
    async () => undefined,
  );
}

/** What `synchronize` would run (and `migration:generate` would write) for these entities. */
function pendingChanges(url: string, entities: DataSourceOptions['entities']): Promise<string[]> {
  return withDataSource(url, { entities }, async (dataSource) => {
    const log = await dataSource.driver.createSchemaBuilder().log();
    return log.upQueries.map((query) => query.query);
  });
}

/** The table as PostgreSQL sees it: columns, constraints and indexes, by name. */
async function describeTable(database: TestDatabase, schema: string, table: string) {
  const columns = await database.query(
    `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default
       FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2
      ORDER BY ordinal_position`,
    [schema, table],
  );
  const constraints = await database.query(
    `SELECT conname, pg_get_constraintdef(c.oid) AS definition
       FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = $1 AND t.relname = $2 ORDER BY conname`,
    [schema, table],
  );
  const indexes = await database.query(
    `SELECT indexname, replace(indexdef, ' ON ' || schemaname || '.', ' ON ') AS indexdef
       FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY indexname`,
    [schema, table],
  );
  return { columns, constraints, indexes };
}

describe('IdempotencyRecordEntity and the shipped migration', () => {
  it('leaves TypeORM nothing to change on the migrated tables (synchronize, migration:generate)', async () => {
    const changes = await pendingChanges(db.url, ENTITIES);
    expect({ changes }).toEqual({ changes: [] });
  });

  it('synchronize from the entities makes the tables the migration makes, which the store accepts', async () => {
    const synchronized = await createTestDatabase();
    try {
      await withDataSource(
        synchronized.url,
        { entities: ENTITIES, synchronize: true },
        async () => undefined,
      );
      for (const table of ['idempotency_records', 'idempotency_records_jobs']) {
        expect(await describeTable(synchronized, 'public', table)).toEqual(
          await describeTable(db, 'public', table),
        );
      }
      expect(await verifyError(synchronized.url)).toBeUndefined();
    } finally {
      await synchronized.drop();
    }
  });

  it('synchronize with the record entity alone: the store names the missing jobs table and its entity', async () => {
    const synchronized = await createTestDatabase();
    try {
      await withDataSource(
        synchronized.url,
        { entities: [IdempotencyRecordEntity], synchronize: true },
        async () => undefined,
      );
      const message = await verifyError(synchronized.url);
      expect(message).toContain(
        'the table "idempotency_records" is missing what this version needs: table "idempotency_records_jobs".',
      );
      expect(message).toContain(
        'list both IdempotencyRecordEntity and IdempotencyJobEntity in its entities',
      );
      expect(message).not.toMatch(/made before/);
    } finally {
      await synchronized.drop();
    }
  });

  describe('schema-qualified table', () => {
    const Billing = createIdempotencyRecordsMigration('billing.idempotency_records');

    it('creates the missing schema, and the entity in that schema matches the table', async () => {
      const fresh = await createTestDatabase();
      try {
        await migrate(fresh.url, Billing);
        expect(
          await fresh.query(
            "SELECT to_regclass('billing.idempotency_records') IS NOT NULL AS present",
          ),
        ).toEqual([{ present: true }]);
        const changes = await pendingChanges(fresh.url, [BillingIdempotencyRecordEntity]);
        expect({ changes }).toEqual({ changes: [] });
        expect(await describeTable(fresh, 'billing', 'idempotency_records')).toEqual(
          await describeTable(db, 'public', 'idempotency_records'),
        );
      } finally {
        await fresh.drop();
      }
    });

    it('uses an existing schema without needing CREATE on the database', async () => {
      const restricted = await createTestDatabase();
      const role = `${restricted.name}_migrator`;
      try {
        await restricted.query('CREATE SCHEMA billing');
        await restricted.query(`CREATE ROLE ${role} LOGIN`);
        await restricted.query(`GRANT USAGE, CREATE ON SCHEMA billing TO ${role}`);
        await restricted.query(`GRANT USAGE, CREATE ON SCHEMA public TO ${role}`);
        await restricted.query(`REVOKE CREATE ON DATABASE ${restricted.name} FROM PUBLIC`);
        const url = new URL(restricted.url);
        url.username = role;
        url.password = '';
        await migrate(url.toString(), Billing);
        expect(
          await restricted.query(
            "SELECT to_regclass('billing.idempotency_records') IS NOT NULL AS present",
          ),
        ).toEqual([{ present: true }]);
      } finally {
        await restricted.drop();
        await db.query(`DROP ROLE IF EXISTS ${role}`);
      }
    });
  });

  describe('upgrade of a table made before operations in phases', () => {
    /** The record table as the create migration made it before operations in phases (columns and all). */
    const BEFORE_PHASES = [
      `CREATE TABLE idempotency_records (
        "scope" text NOT NULL, "idempotency_key" varchar(255) NOT NULL, "record_id" uuid NOT NULL,
        "fingerprint" char(64) NOT NULL, "status" varchar(16) NOT NULL, "owner_token" uuid,
        "locked_until" timestamptz, "expires_at" timestamptz NOT NULL,
        "attempts" integer NOT NULL DEFAULT 1, "method" varchar(16) NOT NULL, "path" text NOT NULL,
        "response_status" smallint, "response_headers" jsonb, "response_body" bytea,
        "created_at" timestamptz NOT NULL DEFAULT now(), "updated_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "idempotency_records_pkey" PRIMARY KEY ("scope", "idempotency_key"),
        CONSTRAINT "idempotency_records_status_check" CHECK ("status" IN ('in_flight', 'completed', 'released')))`,
      'CREATE INDEX "idempotency_records_expires_at_idx" ON idempotency_records ("expires_at")',
      `INSERT INTO idempotency_records (scope, idempotency_key, record_id, fingerprint, status,
         expires_at, method, path, response_status)
       VALUES ('', 'kept', gen_random_uuid(), repeat('a', 64), 'completed', now() + interval '1 day',
         'POST', '/orders', 201)`,
    ];

    it('brings it to the current table, keeping its rows, and is a no-op when run again', async () => {
      const old = await createTestDatabase();
      try {
        for (const sql of BEFORE_PHASES) await old.query(sql);
        await migrate(old.url, AddPhasesToIdempotencyRecords1764028800000);
        await migrate(old.url, AddPurgeAfterToIdempotencyRecords1764201600000);
        await migrate(old.url, AddOperationSettingsToIdempotencyRecords1764288000000);
        expect(await describeTable(old, 'public', 'idempotency_records')).toEqual(
          await describeTable(db, 'public', 'idempotency_records'),
        );
        expect(await describeTable(old, 'public', 'idempotency_records_jobs')).toEqual(
          await describeTable(db, 'public', 'idempotency_records_jobs'),
        );
        expect(await old.query('SELECT idempotency_key, status FROM idempotency_records')).toEqual([
          { idempotency_key: 'kept', status: 'completed' },
        ]);
        const changes = await pendingChanges(old.url, ENTITIES);
        expect({ changes }).toEqual({ changes: [] });
        expect(await verifyError(old.url)).toBeUndefined();
      } finally {
        await old.drop();
      }
    });

    it('changes nothing on a table the current create migration made', async () => {
      const before = await describeTable(db, 'public', 'idempotency_records');
      await migrate(db.url, AddPhasesToIdempotencyRecords1764028800000);
      expect(await describeTable(db, 'public', 'idempotency_records')).toEqual(before);
    });
  });

  describe('upgrade of a table made before purge_after (the completion was not HOT)', () => {
    /** The record table as the create migration made it with phases, before purge_after. */
    const BEFORE_PURGE_AFTER = [
      `CREATE TABLE idempotency_records (
        "scope" text NOT NULL, "idempotency_key" varchar(255) NOT NULL, "record_id" uuid NOT NULL,
        "fingerprint" char(64) NOT NULL, "status" varchar(16) NOT NULL, "owner_token" uuid,
        "locked_until" timestamptz, "expires_at" timestamptz NOT NULL,
        "attempts" integer NOT NULL DEFAULT 1, "method" varchar(16) NOT NULL, "path" text NOT NULL,
        "response_status" smallint, "response_headers" jsonb, "response_body" bytea,
        "created_at" timestamptz NOT NULL DEFAULT now(), "updated_at" timestamptz NOT NULL DEFAULT now(),
        "operation" varchar(200), "recovery_point" varchar(200), "operation_input" jsonb,
        "operation_state" jsonb, "last_run_at" timestamptz,
        CONSTRAINT "idempotency_records_pkey" PRIMARY KEY ("scope", "idempotency_key"),
        CONSTRAINT "idempotency_records_status_check" CHECK ("status" IN ('in_flight', 'completed', 'released', 'abandoned')))`,
      'CREATE INDEX "idempotency_records_expires_at_idx" ON idempotency_records ("expires_at")',
      `CREATE INDEX "idempotency_records_unfinished_idx" ON idempotency_records ("last_run_at")
        WHERE "operation" IS NOT NULL AND "status" IN ('in_flight', 'released')`,
      `INSERT INTO idempotency_records (scope, idempotency_key, record_id, fingerprint, status,
         expires_at, method, path, response_status)
       VALUES ('', 'kept', gen_random_uuid(), repeat('a', 64), 'completed',
         '2030-01-02T03:04:05Z', 'POST', '/orders', 201)`,
    ];

    const fillfactorOf = async (database: TestDatabase) =>
      (
        await database.query(
          `SELECT reloptions FROM pg_class WHERE oid = 'public.idempotency_records'::regclass`,
        )
      )[0].reloptions;

    it('brings it to the current table, filling purge_after from expires_at, and is a no-op when run again', async () => {
      const old = await createTestDatabase();
      try {
        await old.query(BEFORE_PHASES_JOBS_TABLE);
        for (const sql of BEFORE_PURGE_AFTER) await old.query(sql);
        await migrate(old.url, AddPurgeAfterToIdempotencyRecords1764201600000);
        await migrate(old.url, AddOperationSettingsToIdempotencyRecords1764288000000);
        const current = await describeTable(db, 'public', 'idempotency_records');
        expect(await describeTable(old, 'public', 'idempotency_records')).toEqual(current);
        expect(await fillfactorOf(old)).toEqual(['fillfactor=60']);
        expect(await fillfactorOf(db)).toEqual(['fillfactor=60']);
        const kept =
          'SELECT idempotency_key, purge_after = expires_at AS filled FROM idempotency_records';
        expect(await old.query(kept)).toEqual([{ idempotency_key: 'kept', filled: true }]);
        const changes = await pendingChanges(old.url, [IdempotencyRecordEntity]);
        expect({ changes }).toEqual({ changes: [] });

        const again = createIdempotencyPurgeAfterMigration('idempotency_records');
        Object.defineProperty(again, 'name', { value: 'AddPurgeAfterAgain1764201600001' });
        await migrate(old.url, again);
        expect(await describeTable(old, 'public', 'idempotency_records')).toEqual(current);
      } finally {
        await old.drop();
      }
    });

    it('changes nothing on a table the current create migration made', async () => {
      const before = await describeTable(db, 'public', 'idempotency_records');
      await migrate(db.url, AddPurgeAfterToIdempotencyRecords1764201600000);
      expect(await describeTable(db, 'public', 'idempotency_records')).toEqual(before);
    });

    it('is what the store asks for: without it the store refuses to start and names it', async () => {
      const old = await createTestDatabase();
      try {
        await old.query(BEFORE_PHASES_JOBS_TABLE_FULL);
        for (const sql of BEFORE_PURGE_AFTER) await old.query(sql);
        expect(await verifyError(old.url)).toBe(
          'nest-idempotency: the table "idempotency_records" is missing what this version needs: ' +
            'column "purge_after" of "idempotency_records", column "operation_settings" of ' +
            '"idempotency_records". AddPurgeAfterToIdempotencyRecords1764201600000 (or ' +
            'createIdempotencyPurgeAfterMigration(tableName)) adds purge_after: add it to your ' +
            'DataSource migrations and run them. AddOperationSettingsToIdempotencyRecords1764288000000 ' +
            '(or createIdempotencyOperationSettingsMigration(tableName)) adds operation_settings: ' +
            'add it to your DataSource migrations and run them. Migrations run in the order ' +
            "listed: after the create migration, in the order above. If TypeORM's synchronize " +
            'made these tables, list both IdempotencyRecordEntity and IdempotencyJobEntity in ' +
            'its entities instead: it makes only the tables of the entities listed.',
        );
        await migrate(old.url, AddPurgeAfterToIdempotencyRecords1764201600000);
        expect(await verifyError(old.url)).toMatch(
          /needs: column "operation_settings" of "idempotency_records"\. AddOperationSettingsToIdempotencyRecords1764288000000 /,
        );
        await migrate(old.url, AddOperationSettingsToIdempotencyRecords1764288000000);
        expect(await verifyError(old.url)).toBeUndefined();
      } finally {
        await old.drop();
      }
    });
  });

  describe('operation_settings', () => {
    it('is made by the create migration and the entity, and added to an older table by its migration (a no-op when there)', async () => {
      const column = `SELECT data_type, is_nullable FROM information_schema.columns
                       WHERE table_name = 'idempotency_records' AND column_name = 'operation_settings'`;
      expect(await db.query(column)).toEqual([{ data_type: 'jsonb', is_nullable: 'YES' }]);
      const before = await describeTable(db, 'public', 'idempotency_records');
      await migrate(db.url, AddOperationSettingsToIdempotencyRecords1764288000000);
      expect(await describeTable(db, 'public', 'idempotency_records')).toEqual(before);
    });
  });
});

/** The jobs table as the phases migration makes it (the store checks it is there). */
const BEFORE_PHASES_JOBS_TABLE = `CREATE TABLE idempotency_records_jobs (id bigserial PRIMARY KEY)`;

/** The jobs table with all its columns, for a check of what the store says of the record table. */
const BEFORE_PHASES_JOBS_TABLE_FULL = `CREATE TABLE idempotency_records_jobs (
  "id" bigserial PRIMARY KEY, "name" varchar(200) NOT NULL, "args" jsonb NOT NULL,
  "job_key" char(64) NOT NULL, "origin_scope" text NOT NULL, "origin_key" varchar(255) NOT NULL,
  "status" varchar(16) NOT NULL DEFAULT 'pending', "attempts" integer NOT NULL DEFAULT 0,
  "run_after" timestamptz NOT NULL DEFAULT now(), "last_error" text,
  "created_at" timestamptz NOT NULL DEFAULT now(), "updated_at" timestamptz NOT NULL DEFAULT now())`;
