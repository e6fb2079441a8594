import { quoteTableName } from './idempotency-table.sql';
import { wakeUpChannelOf } from './typeorm-wake-ups';
import { announcedWrite } from './wake-up-statements.sql';

// The statements of operations in phases (docs/design/contract.md#operations-in-phases) on the
// record table: every write is guarded by the owner token and, where a step moves the record
// on, by the recovery point it expects (compare-and-set).

/** The caller's own lease: its key, its owner token, still in flight. */
const owned = `r.scope = $1 AND r.idempotency_key = $2 AND r.owner_token = $3 AND r.status = 'in_flight'`;
const at = 'statement_timestamp()';
const written = 'clock_timestamp()';
// Not finished and not running: in flight with a lapsed lease, or released.
// (The recovery point's condition always holds here; it is the unfinished index's predicate,
// written out so that the planner uses that index.)
const idle = `r.operation IS NOT NULL AND r.recovery_point <> 'finished'
                  AND r.status IN ('in_flight', 'released')
                  AND (r.status = 'released' OR r.locked_until <= ${at})`;
const recordColumns = `r.scope, r.idempotency_key, r.record_id, r.fingerprint, r.operation, r.recovery_point, r.operation_settings`;

/** Marks a record abandoned: no owner, no lease. */
const abandonSql = (t: string): string => `
        UPDATE ${t} r SET status = 'abandoned', owner_token = NULL, locked_until = NULL,
               updated_at = ${written}`;

/** Marks a batch of `$1` idle operations abandoned, those that meet `condition`. */
const abandonIdleSql = (t: string, condition: string): string => `${abandonSql(t)}
         WHERE ctid = ANY(ARRAY(
           SELECT ctid FROM ${t} r
            WHERE ${idle} AND ${condition}
            LIMIT $1 FOR UPDATE SKIP LOCKED))
        RETURNING ${recordColumns}, NULL::uuid AS owner_token, r.attempts`;

/** The statements of a run's steps, each on the lease the run holds. */
const stepSql = (t: string) => ({
  bind: `
        UPDATE ${t} r SET
               operation = coalesce(r.operation, $4),
               operation_input = CASE WHEN r.recovery_point IS NULL THEN $5::jsonb ELSE r.operation_input END,
               operation_state = coalesce(r.operation_state, '{}'::jsonb),
               operation_settings = coalesce(r.operation_settings, $6::jsonb),
               recovery_point = coalesce(r.recovery_point, 'started'),
               last_run_at = ${written}, updated_at = ${written}
          FROM (SELECT recovery_point AS previous FROM ${t}
                 WHERE scope = $1 AND idempotency_key = $2) p
         WHERE ${owned}
        RETURNING r.record_id, r.operation, r.recovery_point, r.operation_input, r.operation_state,
                  p.previous IS NOT NULL AS resumed,
                  EXTRACT(EPOCH FROM ${written} - r.created_at)::float8 AS age_seconds`,
  lockStep: `
        SELECT r.operation_state FROM ${t} r
         WHERE ${owned} AND r.recovery_point = $4
           FOR UPDATE`,
  advance: `
        UPDATE ${t} r SET recovery_point = $5, operation_state = $6::jsonb,
               last_run_at = ${written}, updated_at = ${written}
         WHERE ${owned} AND r.recovery_point = $4`,
  finish: `
        UPDATE ${t} r SET status = 'completed', recovery_point = 'finished',
               operation_state = $5::jsonb, response_status = $6, response_headers = $7,
               response_body = $8, expires_at = ${written} + $9::float8 * interval '1 second',
               purge_after = LEAST(r.purge_after, ${written} + $9::float8 * interval '1 second'),
               locked_until = NULL, last_run_at = ${written}, updated_at = ${written}
         WHERE ${owned} AND r.recovery_point = $4`,
  abandon: `${abandonSql(t)}
         WHERE ${owned}`,
});

/** The completer's and the reaper's statements: batches of idle or abandoned operations. */
const reaperSql = (t: string) => ({
  takeOver: `
        UPDATE ${t} r SET owner_token = gen_random_uuid(), status = 'in_flight',
               locked_until = ${written} + $4::float8 * interval '1 second',
               attempts = r.attempts + 1, last_run_at = ${written}, updated_at = ${written}
          FROM (SELECT scope, idempotency_key FROM ${t} r
                 WHERE ${idle}
                   AND (r.last_run_at IS NULL OR r.last_run_at <= ${at} - $2::float8 * interval '1 second')
                   AND r.created_at > ${at} - $3::float8 * interval '1 second'
                 ORDER BY r.last_run_at NULLS FIRST
                 LIMIT $1 FOR UPDATE SKIP LOCKED) c
         WHERE r.scope = c.scope AND r.idempotency_key = c.idempotency_key
        RETURNING ${recordColumns}, r.owner_token, r.attempts`,
  abandonOld: abandonIdleSql(t, `r.created_at <= ${at} - $2::float8 * interval '1 second'`),
  reapExpired: abandonIdleSql(t, `r.expires_at <= ${at}`),
  deleteAbandoned: `
        WITH gone AS (
          DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM ${t} r
             WHERE r.status = 'abandoned' AND r.updated_at <= ${at} - $2::float8 * interval '1 second'
             LIMIT $1 FOR UPDATE SKIP LOCKED))
          RETURNING 1
        )
        SELECT count(*)::int AS deleted FROM gone`,
});

/** The operator's statements on abandoned operations: list, read, resolve. */
const abandonedSql = (t: string) => ({
  listAbandoned: `
        SELECT ${recordColumns}, r.operation_input, r.operation_state, r.attempts, r.created_at,
               r.updated_at
          FROM ${t} r WHERE r.status = 'abandoned'
         ORDER BY r.updated_at, r.scope, r.idempotency_key LIMIT $1`,
  resolveComplete: `
        UPDATE ${t} r SET status = 'completed', recovery_point = 'finished', response_status = $3,
               response_headers = $4, response_body = $5,
               expires_at = ${written} + $6::float8 * interval '1 second',
               purge_after = LEAST(r.purge_after, ${written} + $6::float8 * interval '1 second'),
               updated_at = ${written}
         WHERE r.scope = $1 AND r.idempotency_key = $2 AND r.status = 'abandoned'
           AND r.record_id = $7 AND r.fingerprint = $8`,
  abandonedRecord: `
        SELECT r.record_id, r.fingerprint, r.operation_settings FROM ${t} r
         WHERE r.scope = $1 AND r.idempotency_key = $2 AND r.status = 'abandoned'`,
  resolveDelete: `
        DELETE FROM ${t} r WHERE r.scope = $1 AND r.idempotency_key = $2 AND r.status = 'abandoned'`,
});

/**
 * The text of every statement `TypeOrmPhaseStore` sends, by name.
 * @param tableName - the record table, as configured (quoted here)
 */
export function phaseStatements(tableName: string) {
  const t = quoteTableName(tableName);
  const steps = stepSql(t);
  return {
    ...steps,
    // The last step of a run whose route may wait announces the completion at its commit, as
    // the plain completion does (TypeOrmWakeUps).
    finishAnnounced: announcedWrite(steps.finish, wakeUpChannelOf(tableName), '$10'),
    ...reaperSql(t),
    ...abandonedSql(t),
  };
}

/**
 * The isolation of a local step's transaction, its first statement.
 * @param isolation - a level the step's options allow (`READ COMMITTED` sends nothing)
 */
export const isolationLevelSql = (isolation: string): string =>
  `SET TRANSACTION ISOLATION LEVEL ${isolation}`;

/** The name of one of the phase store's statements. */
export type PhaseStatementName = keyof ReturnType<typeof phaseStatements>;
