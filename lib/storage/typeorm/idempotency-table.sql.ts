/**
 * Quotes a (possibly schema-qualified) table name for SQL.
 * @param tableName - validated at bootstrap to be `[schema.]identifier`
 */
export const quoteTableName = (tableName: string): string => `"${tableName.replace('.', '"."')}"`;

/**
 * The schema of a schema-qualified table name.
 * @param tableName - validated at bootstrap to be `[schema.]identifier`
 * @returns the schema, or `undefined` for a bare name
 */
export function schemaOf(tableName: string): string | undefined {
  return tableName.includes('.') ? tableName.split('.')[0] : undefined;
}

function bareName(tableName: string): string {
  return tableName.slice(tableName.indexOf('.') + 1);
}

/**
 * The staged-jobs table of a record table: `<tableName>_jobs`, in the same schema.
 * @param tableName - the record table, optionally schema-qualified
 */
export const jobsTableNameOf = (tableName: string): string => `${tableName}_jobs`;

const STATUS_CHECK = `CHECK ("status" IN ('in_flight', 'completed', 'released', 'abandoned'))`;

/** Columns of the record table used by operations in phases (docs/design/contract.md#operations-in-phases), as DDL fragments. */
const PHASE_COLUMNS = [
  '"operation" varchar(200)',
  '"recovery_point" varchar(200)',
  '"operation_input" jsonb',
  '"operation_state" jsonb',
  '"last_run_at" timestamptz',
];

/**
 * How full PostgreSQL packs the record table's pages on insert. The room left lets the
 * completion (status, response, expiry: no indexed column) write the row's new version on the
 * same page, a HOT update that adds no index entries; at the default 100 every completion
 * moved the row to another page and wrote new entries in every index.
 */
export const RECORD_TABLE_FILLFACTOR = 60;

/** The completer's index: unfinished operations in phases, by when they last ran. */
function unfinishedIndexSql(tableName: string): string {
  return `CREATE INDEX IF NOT EXISTS "${bareName(tableName)}_unfinished_idx" ON ${quoteTableName(tableName)} ("last_run_at")
      WHERE "operation" IS NOT NULL AND "recovery_point" <> 'finished'`;
}

/** DDL of the jobs table and the records' unfinished-operations index (both idempotent). */
function phaseObjectsSql(tableName: string): string[] {
  const jobs = jobsTableNameOf(tableName);
  const jobsName = bareName(jobs);
  return [
    // The completer's candidates: few rows (unfinished operations only), found without a scan.
    // The predicate names no column a plain route's completion changes (not `status`), so that
    // completion can stay a HOT update (see `RECORD_TABLE_FILLFACTOR`).
    unfinishedIndexSql(tableName),
    `CREATE TABLE IF NOT EXISTS ${quoteTableName(jobs)} (
      "id" bigserial NOT NULL,
      "name" varchar(200) NOT NULL,
      "args" jsonb NOT NULL,
      "job_key" char(64) NOT NULL,
      "origin_scope" text NOT NULL,
      "origin_key" varchar(255) NOT NULL,
      "status" varchar(16) NOT NULL DEFAULT 'pending',
      "attempts" integer NOT NULL DEFAULT 0,
      "run_after" timestamptz NOT NULL DEFAULT now(),
      "last_error" text,
      "created_at" timestamptz NOT NULL DEFAULT now(),
      "updated_at" timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT "${jobsName}_pkey" PRIMARY KEY ("id"),
      CONSTRAINT "${jobsName}_status_check" CHECK ("status" IN ('pending', 'dead'))
    )`,
    `CREATE INDEX IF NOT EXISTS "${jobsName}_due_idx" ON ${quoteTableName(jobs)} ("run_after", "id")
      WHERE "status" = 'pending'`,
  ];
}

/**
 * DDL that creates the record table, its indexes and its jobs table. Used by the shipped
 * migration.
 * @param tableName - table name, optionally schema-qualified
 */
export function createIdempotencyTableSql(tableName: string): string[] {
  const table = quoteTableName(tableName);
  const name = bareName(tableName);
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (
      "scope" text NOT NULL,
      "idempotency_key" varchar(255) NOT NULL,
      "record_id" uuid NOT NULL,
      "fingerprint" char(64) NOT NULL,
      "status" varchar(16) NOT NULL,
      "owner_token" uuid,
      "locked_until" timestamptz,
      "expires_at" timestamptz NOT NULL,
      "attempts" integer NOT NULL DEFAULT 1,
      "method" varchar(16) NOT NULL,
      "path" text NOT NULL,
      "response_status" smallint,
      "response_headers" jsonb,
      "response_body" bytea,
      "created_at" timestamptz NOT NULL DEFAULT now(),
      "updated_at" timestamptz NOT NULL DEFAULT now(),
      ${PHASE_COLUMNS.join(',\n      ')},
      ${PURGE_AFTER_COLUMN} NOT NULL,
      ${OPERATION_SETTINGS_COLUMN},
      CONSTRAINT "${name}_pkey" PRIMARY KEY ("scope", "idempotency_key"),
      CONSTRAINT "${name}_status_check" ${STATUS_CHECK}
    ) WITH (fillfactor = ${RECORD_TABLE_FILLFACTOR})`,
    purgeIndexSql(tableName),
    ...phaseObjectsSql(tableName),
  ];
}

/**
 * The earliest a record can expire: set by the claim to the claim's time plus the TTL, never
 * moved by the completion (which sets `expires_at` from its own time, so later). The purge
 * finds expired rows through its index and checks `expires_at` on them, which is how the
 * expiry can move without an index write.
 */
const PURGE_AFTER_COLUMN = '"purge_after" timestamptz';

const purgeIndexSql = (tableName: string): string =>
  `CREATE INDEX IF NOT EXISTS "${bareName(tableName)}_purge_after_idx" ON ${quoteTableName(tableName)} ("purge_after")`;

/** The quoted name of one of `tableName`'s indexes or functions, in the table's schema. */
function indexName(tableName: string, suffix: string): string {
  return quoteTableName(`${tableName}_${suffix}`);
}

/**
 * The settings of the route that started an operation in phases, so the background completer
 * answers with them. Null for a plain route and for operations started before it existed.
 */
const OPERATION_SETTINGS_COLUMN = '"operation_settings" jsonb';

/** The trigger function that keeps `purge_after` right for the previous release's statements. */
const PURGE_AFTER_FILL = 'purge_after_fill';

/**
 * DDL of the expand step that lets the previous release (before `purge_after`) keep serving on
 * the upgraded table. Its statements never write `purge_after`, so two `BEFORE` row triggers
 * write it for them, each guarded by a `WHEN` the current release's statements never meet
 * (PostgreSQL evaluates it without calling the function):
 * - an insert without `purge_after` (the old claim) gets `expires_at`: `NOT NULL` is checked
 *   after `BEFORE` triggers, so the insert succeeds instead of answering 503;
 * - an update that leaves `purge_after` after the new `expires_at` (the old completion with a
 *   shorter TTL) or starts a new record on an expired row without touching it (the old claim's
 *   re-claim) gets the new `expires_at`, so the purge, which looks rows up by `purge_after`,
 *   still finds each row as soon as it expires.
 * The contract step that drops them ships with the next release, to be run once no instance
 * of the release before this one is left. Idempotent.
 * @param tableName - table name, optionally schema-qualified
 */
export function purgeAfterFillSql(tableName: string): string[] {
  const table = quoteTableName(tableName);
  const fill = indexName(tableName, PURGE_AFTER_FILL);
  const insertTrigger = `"${bareName(tableName)}_purge_after_fill_insert"`;
  const updateTrigger = `"${bareName(tableName)}_purge_after_fill_update"`;
  return [
    `CREATE OR REPLACE FUNCTION ${fill}() RETURNS trigger LANGUAGE plpgsql AS $fill$
     BEGIN
       NEW.purge_after := NEW.expires_at;
       RETURN NEW;
     END $fill$`,
    `DROP TRIGGER IF EXISTS ${insertTrigger} ON ${table}`,
    `CREATE TRIGGER ${insertTrigger} BEFORE INSERT ON ${table} FOR EACH ROW
       WHEN (NEW.purge_after IS NULL) EXECUTE FUNCTION ${fill}()`,
    `DROP TRIGGER IF EXISTS ${updateTrigger} ON ${table}`,
    `CREATE TRIGGER ${updateTrigger} BEFORE UPDATE ON ${table} FOR EACH ROW
       WHEN (NEW.purge_after IS NULL OR NEW.purge_after > NEW.expires_at
             OR (NEW.record_id <> OLD.record_id AND NEW.purge_after = OLD.purge_after))
       EXECUTE FUNCTION ${fill}()`,
  ];
}

/**
 * DDL that makes a plain route's completion a HOT update on a record table made before it
 * could be: `purge_after` (filled from `expires_at`) and its index instead of the index on
 * `expires_at`, the unfinished-operations index without `status` in its predicate, and the
 * table's fillfactor (which applies to pages written from then on). An expand step: the
 * previous release keeps serving on the table (see `purgeAfterFillSql`); its purge and
 * completer lose the indexes they used, so on a large table they are slower until replaced.
 * Idempotent: on a table the current create migration made it only adds the triggers. The
 * backfill rewrites every row once: run it when the table is small (records live for their
 * TTL), or expect a pause of that size.
 * @param tableName - table name, optionally schema-qualified
 */
export function addIdempotencyPurgeAfterSql(tableName: string): string[] {
  const table = quoteTableName(tableName);
  return [
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${PURGE_AFTER_COLUMN}`,
    // Before the backfill and NOT NULL: rows the previous release writes from here on are filled.
    ...purgeAfterFillSql(tableName),
    `UPDATE ${table} SET "purge_after" = "expires_at" WHERE "purge_after" IS NULL`,
    `ALTER TABLE ${table} ALTER COLUMN "purge_after" SET NOT NULL`,
    purgeIndexSql(tableName),
    `DROP INDEX IF EXISTS ${indexName(tableName, 'expires_at_idx')}`,
    // Made again only when its predicate is the old one (status) or it is missing.
    `DO $$ BEGIN
       IF EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = to_regclass('${indexName(tableName, 'unfinished_idx').replace(/'/g, "''")}')
                   AND pg_get_expr(i.indpred, i.indrelid) LIKE '%status%') THEN
         DROP INDEX ${indexName(tableName, 'unfinished_idx')};
       END IF;
     END $$`,
    unfinishedIndexSql(tableName),
    `ALTER TABLE ${table} SET (fillfactor = ${RECORD_TABLE_FILLFACTOR})`,
  ];
}

/**
 * DDL that adds `operation_settings` to a record table made before it. An expand step: a
 * nullable column without a default, which the previous release never names. Idempotent.
 * @param tableName - table name, optionally schema-qualified
 */
export const addIdempotencyOperationSettingsSql = (tableName: string): string[] => [
  `ALTER TABLE ${quoteTableName(tableName)} ADD COLUMN IF NOT EXISTS ${OPERATION_SETTINGS_COLUMN}`,
];

/**
 * DDL that brings a record table made before operations in phases up to date: the phase
 * columns, the `abandoned` status, the unfinished-operations index and the jobs table. Every
 * statement is idempotent, so it is a no-op on a table the current migration made.
 * @param tableName - table name, optionally schema-qualified
 */
export function addIdempotencyPhasesSql(tableName: string): string[] {
  const table = quoteTableName(tableName);
  const name = bareName(tableName);
  return [
    ...PHASE_COLUMNS.map((column) => `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column}`),
    `ALTER TABLE ${table} DROP CONSTRAINT IF EXISTS "${name}_status_check"`,
    `ALTER TABLE ${table} ADD CONSTRAINT "${name}_status_check" ${STATUS_CHECK}`,
    ...phaseObjectsSql(tableName),
  ];
}

/** DDL of the phases migration's `down()`: the jobs table goes, the added columns stay. */
export const dropJobsTableSql = (tableName: string): string[] => [
  `DROP TABLE IF EXISTS ${quoteTableName(jobsTableNameOf(tableName))}`,
];

/** DDL of the operation-settings migration's `down()`. */
export const dropOperationSettingsSql = (tableName: string): string[] => [
  `ALTER TABLE ${quoteTableName(tableName)} DROP COLUMN IF EXISTS "operation_settings"`,
];

/** Whether the schema `$1` exists: the create migration makes it only when it does not. */
export const SCHEMA_EXISTS_SQL = 'SELECT 1 FROM pg_namespace WHERE nspname = $1';

/** DDL that creates a record table's schema. */
export const createSchemaSql = (schema: string): string =>
  `CREATE SCHEMA IF NOT EXISTS ${quoteTableName(schema)}`;

/**
 * DDL that drops the record table, its jobs table and the upgrade's trigger function.
 * @param tableName - table name, optionally schema-qualified
 */
export const dropIdempotencyTableSql = (tableName: string): string[] => [
  `DROP TABLE IF EXISTS ${quoteTableName(jobsTableNameOf(tableName))}`,
  `DROP TABLE IF EXISTS ${quoteTableName(tableName)}`,
  `DROP FUNCTION IF EXISTS ${indexName(tableName, PURGE_AFTER_FILL)}()`,
];
