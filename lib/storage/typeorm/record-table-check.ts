import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';
import type { SchemaFix } from '../../config/idempotency-configuration.error';

/** A row of the bootstrap check (`RECORD_TABLE_CHECK_SQL`, record-statements.sql.ts). */
export interface RecordTableCheckRow {
  present: boolean;
  jobs: boolean;
  columns: string[];
  job_columns: string[];
}

/** The columns each migration adds to the record table, in the order they shipped. */
const RECORD_COLUMNS: ReadonlyArray<[SchemaFix, string]> = [
  [
    'create',
    'scope idempotency_key record_id fingerprint status owner_token locked_until expires_at ' +
      'attempts method path response_status response_headers response_body created_at updated_at',
  ],
  ['phases', 'operation recovery_point operation_input operation_state last_run_at'],
  ['purgeAfter', 'purge_after'],
  ['operationSettings', 'operation_settings'],
];

/** The jobs table's columns, all made by the phases migration. */
const JOB_COLUMNS =
  'id name args job_key origin_scope origin_key status attempts run_after last_error ' +
  'created_at updated_at';

/**
 * Turns what the check read into the error that says exactly what is missing and what adds it,
 * or `undefined` when the tables have everything this version's statements use.
 * @param table - the quoted record table
 * @param jobsTable - the quoted jobs table
 * @param row - the check's answer
 */
export function recordTableProblem(
  table: string,
  jobsTable: string,
  row: RecordTableCheckRow | undefined,
): IdempotencyConfigurationError | undefined {
  if (row?.present !== true) return IdempotencyConfigurationError.tableMissing(table);
  const missing: string[] = [];
  const fixes = new Set<SchemaFix>();
  const look = (name: string, have: string[], columns: string, fix: SchemaFix) => {
    const absent = columns.split(' ').filter((column) => !have.includes(column));
    missing.push(...absent.map((column) => `column "${column}" of ${name}`));
    if (absent.length > 0) fixes.add(fix);
  };
  for (const [fix, columns] of RECORD_COLUMNS) look(table, row.columns, columns, fix);
  if (row.jobs === true) look(jobsTable, row.job_columns, JOB_COLUMNS, 'jobsTable');
  else {
    missing.push(`table ${jobsTable}`);
    fixes.add('phases');
  }
  if (missing.length === 0) return undefined;
  return IdempotencyConfigurationError.schemaIncomplete(table, missing, [...fixes]);
}
