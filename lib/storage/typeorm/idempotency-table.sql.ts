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
 * DDL that creates the record table and its index. Used by the shipped migration.
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
      CONSTRAINT "${name}_pkey" PRIMARY KEY ("scope", "idempotency_key"),
      CONSTRAINT "${name}_status_check" CHECK ("status" IN ('in_flight', 'completed', 'released'))
    )`,
    `CREATE INDEX IF NOT EXISTS "${name}_expires_at_idx" ON ${table} ("expires_at")`,
  ];
}

/**
 * DDL that drops the record table.
 * @param tableName - table name, optionally schema-qualified
 */
export function dropIdempotencyTableSql(tableName: string): string[] {
  return [`DROP TABLE IF EXISTS ${quoteTableName(tableName)}`];
}
