import type { IdempotencyOperatorListKind } from '../idempotency-store.capabilities';
import { quoteTableName } from './idempotency-table.sql';

/** The name of one of the operator tool's statements. */
export type OperatorStatementName =
  'inspect' | 'inspectWithBody' | IdempotencyOperatorListKind | 'release';

/**
 * The text of every statement `TypeOrmOperator` sends, by name, on the database clock.
 * @param tableName - the record table, as configured (quoted here)
 */
export function operatorStatements(tableName: string): Record<OperatorStatementName, string> {
  const t = quoteTableName(tableName);
  const at = 'statement_timestamp()';
  const columns = `r.scope, r.idempotency_key, r.status, r.record_id, r.method, r.path,
      r.operation, r.recovery_point, r.attempts, r.expires_at, r.created_at, r.updated_at,
      r.response_status, (r.status = 'in_flight' AND r.locked_until <= ${at}) AS stuck,
      CASE WHEN r.locked_until IS NULL THEN NULL
           ELSE GREATEST(0, EXTRACT(EPOCH FROM r.locked_until - ${at}))::float8 END AS lease_left`;
  const one = `FROM ${t} r WHERE r.scope = $1 AND r.idempotency_key = $2`;
  return {
    inspect: `SELECT ${columns} ${one}`,
    inspectWithBody: `SELECT ${columns}, r.response_body ${one}`,
    in_flight: `SELECT ${columns} FROM ${t} r WHERE r.status = 'in_flight'
         ORDER BY r.created_at, r.scope, r.idempotency_key LIMIT $1`,
    stuck: `SELECT ${columns} FROM ${t} r
         WHERE r.status = 'in_flight' AND r.locked_until <= ${at}
         ORDER BY r.locked_until, r.scope, r.idempotency_key LIMIT $1`,
    abandoned: `SELECT ${columns} FROM ${t} r WHERE r.status = 'abandoned'
         ORDER BY r.updated_at, r.scope, r.idempotency_key LIMIT $1`,
    // As the store's own release for a retry, without an owner token: only a lapsed lease.
    // The record's state before the update tells a refusal from a missing key.
    release: `
        WITH target AS (
          SELECT r.status, r.locked_until > ${at} AS live ${one}
        ), freed AS (
          UPDATE ${t} r SET status = 'released', locked_until = NULL, updated_at = ${at}
           WHERE r.scope = $1 AND r.idempotency_key = $2 AND r.status = 'in_flight'
             AND r.locked_until <= ${at}
          RETURNING 1
        )
        SELECT (SELECT count(*) FROM freed)::int AS freed, t.status, t.live
          FROM (SELECT 1) one LEFT JOIN target t ON true`,
  };
}
