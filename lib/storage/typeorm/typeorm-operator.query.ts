import type {
  IdempotencyOperatorListKind,
  IdempotencyOperatorRecord,
  IdempotencyOperatorReleaseResult,
  IdempotencyStoreOperator,
} from '../idempotency-store.capabilities';
import { quoteTableName } from './idempotency-table.sql';
import { prepareStatement } from './prepared-statement';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmStoreConnection } from './store-connection';

type OperatorStatement = 'inspect' | 'inspectWithBody' | IdempotencyOperatorListKind | 'release';

/**
 * The operator tool's statements on the record table, on the database clock. Each runs through
 * the store's statement runner: its pool, its timeout (`typeOrmStore({ timeoutSeconds })`).
 * @internal
 */
export class TypeOrmOperator implements IdempotencyStoreOperator {
  private readonly sql: Record<OperatorStatement, PreparedStatement>;

  /**
   * @param store - the TypeORM store whose connections and timeout the statements use
   * @param tableName - the record table
   */
  constructor(
    private readonly store: TypeOrmStoreConnection,
    tableName: string,
  ) {
    const t = quoteTableName(tableName);
    const at = 'statement_timestamp()';
    const columns = `r.scope, r.idempotency_key, r.status, r.record_id, r.method, r.path,
      r.operation, r.recovery_point, r.attempts, r.expires_at, r.created_at, r.updated_at,
      r.response_status, (r.status = 'in_flight' AND r.locked_until <= ${at}) AS stuck,
      CASE WHEN r.locked_until IS NULL THEN NULL
           ELSE GREATEST(0, EXTRACT(EPOCH FROM r.locked_until - ${at}))::float8 END AS lease_left`;
    const one = `FROM ${t} r WHERE r.scope = $1 AND r.idempotency_key = $2`;
    const sql: Record<OperatorStatement, string> = {
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
    this.sql = Object.fromEntries(
      Object.entries(sql).map(([name, text]) => [name, prepareStatement(text)]),
    ) as Record<OperatorStatement, PreparedStatement>;
  }

  /** @inheritDoc */
  async inspect(
    scope: string,
    key: string,
    withBody: boolean,
  ): Promise<IdempotencyOperatorRecord | undefined> {
    const statement = withBody ? this.sql.inspectWithBody : this.sql.inspect;
    const { rows } = await this.store.runStatement('operator inspect', statement, [scope, key]);
    return rows[0] && recordOf(rows[0], withBody);
  }

  /** @inheritDoc */
  async list(
    kind: IdempotencyOperatorListKind,
    limit: number,
  ): Promise<IdempotencyOperatorRecord[]> {
    const { rows } = await this.store.runStatement(`operator list ${kind}`, this.sql[kind], [
      limit,
    ]);
    return rows.map((row) => recordOf(row, false));
  }

  /** @inheritDoc */
  async releaseStuck(scope: string, key: string): Promise<IdempotencyOperatorReleaseResult> {
    const { rows } = await this.store.runStatement('operator release', this.sql.release, [
      scope,
      key,
    ]);
    const row = rows[0];
    if (Number(row.freed) === 1) return 'released';
    if (row.status === null || row.status === undefined) return 'not_found';
    return row.status === 'in_flight' && row.live ? 'lease_live' : 'not_in_flight';
  }
}

function recordOf(row: any, withBody: boolean): IdempotencyOperatorRecord {
  const record: IdempotencyOperatorRecord = {
    scope: row.scope,
    key: row.idempotency_key,
    status: row.status,
    stuck: row.stuck === true,
    recordId: row.record_id,
    method: row.method,
    path: row.path,
    operation: row.operation ?? null,
    recoveryPoint: row.recovery_point ?? null,
    attempts: Number(row.attempts),
    leaseSecondsLeft:
      row.lease_left === null || row.lease_left === undefined
        ? null
        : Math.round(Number(row.lease_left) * 1000) / 1000,
    expiresAt: new Date(row.expires_at),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
    storedStatus: row.response_status === null ? null : Number(row.response_status),
  };
  if (withBody) record.body = row.response_body ?? null;
  return record;
}
