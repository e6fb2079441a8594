import type {
  IdempotencyOperatorListKind,
  IdempotencyOperatorRecord,
  IdempotencyOperatorReleaseResult,
  IdempotencyStoreOperator,
} from '../idempotency-store.capabilities';
import { operatorStatements } from './operator-statements.sql';
import type { OperatorStatementName } from './operator-statements.sql';
import { prepareStatements } from './prepared-statement';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmStoreConnection } from './store-connection';

/**
 * The operator tool's statements on the record table, on the database clock. Each runs through
 * the store's statement runner: its pool, its timeout (`typeOrmStore({ timeoutSeconds })`).
 * @internal
 */
export class TypeOrmOperator implements IdempotencyStoreOperator {
  private readonly sql: Record<OperatorStatementName, PreparedStatement>;

  /**
   * @param store - the TypeORM store whose connections and timeout the statements use
   * @param tableName - the record table
   */
  constructor(
    private readonly store: TypeOrmStoreConnection,
    tableName: string,
  ) {
    this.sql = prepareStatements(operatorStatements(tableName));
  }

  /** @inheritDoc */
  async inspect(
    scope: string,
    key: string,
    withBody: boolean,
  ): Promise<IdempotencyOperatorRecord | undefined> {
    const statement = withBody ? this.sql.inspectWithBody : this.sql.inspect;
    const { rows } = await this.store.run('operator inspect', statement, [scope, key]);
    return rows[0] && recordOf(rows[0], withBody);
  }

  /** @inheritDoc */
  async list(
    kind: IdempotencyOperatorListKind,
    limit: number,
  ): Promise<IdempotencyOperatorRecord[]> {
    const { rows } = await this.store.run(`operator list ${kind}`, this.sql[kind], [limit]);
    return rows.map((row) => recordOf(row, false));
  }

  /** @inheritDoc */
  async releaseStuck(scope: string, key: string): Promise<IdempotencyOperatorReleaseResult> {
    const { rows } = await this.store.run('operator release', this.sql.release, [scope, key]);
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
