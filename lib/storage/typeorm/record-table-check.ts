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
const RECORD_COLUMNS: ReadonlyArray<{ columns: readonly string[]; fix: SchemaFix }> = [
  {
    columns: [
      'scope',
      'idempotency_key',
      'record_id',
      'fingerprint',
      'status',
      'owner_token',
      'locked_until',
      'expires_at',
      'attempts',
      'method',
      'path',
      'response_status',
      'response_headers',
      'response_body',
      'created_at',
      'updated_at',
    ],
    fix: 'create',
  },
  {
    columns: ['operation', 'recovery_point', 'operation_input', 'operation_state', 'last_run_at'],
    fix: 'phases',
  },
  { columns: ['purge_after'], fix: 'purgeAfter' },
  { columns: ['operation_settings'], fix: 'operationSettings' },
];

/** The jobs table's columns, all made by the phases migration. */
const JOB_COLUMNS = [
  'id',
  'name',
  'args',
  'job_key',
  'origin_scope',
  'origin_key',
  'status',
  'attempts',
  'run_after',
  'last_error',
  'created_at',
  'updated_at',
];

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
  const have = new Set(row.columns);
  const missing: string[] = [];
  const fixes = new Set<SchemaFix>();
  for (const { columns, fix } of RECORD_COLUMNS) {
    const absent = columns.filter((column) => !have.has(column));
    if (absent.length === 0) continue;
    missing.push(...absent.map((column) => `column "${column}" of ${table}`));
    fixes.add(fix);
  }
  if (row.jobs !== true) {
    missing.push(`table ${jobsTable}`);
    fixes.add('phases');
  } else {
    const haveJobs = new Set(row.job_columns);
    const absent = JOB_COLUMNS.filter((column) => !haveJobs.has(column));
    if (absent.length > 0) {
      missing.push(...absent.map((column) => `column "${column}" of ${jobsTable}`));
      fixes.add('jobsTable');
    }
  }
  if (missing.length === 0) return undefined;
  return IdempotencyConfigurationError.schemaIncomplete(table, missing, [...fixes]);
}
