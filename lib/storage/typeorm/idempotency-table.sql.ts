/**
 * Quotes a (possibly schema-qualified) table name for SQL.
 * @param tableName - validated at bootstrap to be `[schema.]identifier`
 */
export function quoteTableName(tableName: string): string {
  return tableName
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}

/**
 * The schema of a schema-qualified table name.
 * @param tableName - validated at bootstrap to be `[schema.]identifier`
 * @returns the schema, or `undefined` for a bare name
 */
export function schemaOf(tableName: string): string | undefined {
  const parts = tableName.split('.');
  return parts.length > 1 ? parts[0] : undefined;
}

function bareName(tableName: string): string {
  const parts = tableName.split('.');
  return parts[parts.length - 1];
}

/**
 * The staged-jobs table of a record table: `<tableName>_jobs`, in the same schema.
 * @param tableName - the record table, optionally schema-qualified
 */
export function jobsTableNameOf(tableName: string): string {
  return `${tableName}_jobs`;
}

const STATUS_CHECK = `CHECK ("status" IN ('in_flight', 'completed', 'released', 'abandoned'))`;

/** Columns of the record table used by operations in phases (SPEC §8), as DDL fragments. */
const PHASE_COLUMNS = [
  '"operation" varchar(200)',
  '"recovery_point" varchar(200)',
  '"operation_input" jsonb',
  '"operation_state" jsonb',
  '"last_run_at" timestamptz',
];

/** DDL of the jobs table and the records' unfinished-operations index (both idempotent). */
function phaseObjectsSql(tableName: string): string[] {
  const table = quoteTableName(tableName);
  const name = bareName(tableName);
  const jobs = jobsTableNameOf(tableName);
  const jobsName = bareName(jobs);
  return [
    // The completer's candidates: few rows (unfinished operations only), found without a scan.
    `CREATE INDEX IF NOT EXISTS "${name}_unfinished_idx" ON ${table} ("last_run_at")
      WHERE "operation" IS NOT NULL AND "status" IN ('in_flight', 'released')`,
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
      CONSTRAINT "${name}_pkey" PRIMARY KEY ("scope", "idempotency_key"),
      CONSTRAINT "${name}_status_check" ${STATUS_CHECK}
    )`,
    `CREATE INDEX IF NOT EXISTS "${name}_expires_at_idx" ON ${table} ("expires_at")`,
    ...phaseObjectsSql(tableName),
  ];
}

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

/**
 * DDL that drops the record table and its jobs table.
 * @param tableName - table name, optionally schema-qualified
 */
export function dropIdempotencyTableSql(tableName: string): string[] {
  return [
    `DROP TABLE IF EXISTS ${quoteTableName(jobsTableNameOf(tableName))}`,
    `DROP TABLE IF EXISTS ${quoteTableName(tableName)}`,
  ];
}
