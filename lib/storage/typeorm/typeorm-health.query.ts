import type { IdempotencyTableHealth } from '../idempotency-store.capabilities';
import { quoteTableName } from './idempotency-table.sql';
import { prepareStatement } from './prepared-statement';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmStoreConnection } from './store-connection';
import { Deadline } from './with-deadline';

const statements = new Map<string, PreparedStatement>();

/**
 * One statement, four counts, each bounded by `$1` rows so that a check stays cheap on a large
 * table. The conditions are those of the store's own statements (claim, purge, completer), on
 * the database clock.
 */
function healthStatement(tableName: string): PreparedStatement {
  let statement = statements.get(tableName);
  if (statement) return statement;
  const t = quoteTableName(tableName);
  const at = 'statement_timestamp()';
  const bounded = (where: string) =>
    `(SELECT count(*) FROM (SELECT 1 FROM ${t} r WHERE ${where} LIMIT $1) s)::int`;
  statement = prepareStatement(`
    SELECT ${bounded(`r.status = 'in_flight' AND r.locked_until < ${at}`)} AS stuck_in_flight,
           ${bounded(
             `r.operation IS NOT NULL AND r.recovery_point <> 'finished' AND ` +
               `(r.status = 'released' OR (r.status = 'in_flight' AND r.locked_until <= ${at}))`,
           )} AS idle_operations,
           ${bounded(`r.status = 'abandoned'`)} AS abandoned_operations,
           ${bounded(
             `r.purge_after <= ${at} AND r.expires_at <= ${at} ` +
               `AND NOT (r.status = 'in_flight' AND r.locked_until > ${at}) ` +
               `AND (r.operation IS NULL OR r.status = 'completed')`,
           )} AS purge_backlog`);
  statements.set(tableName, statement);
  return statement;
}

/**
 * Reads the record table's health through the store's statement runner (its pool, its own
 * timeout), answering within `timeoutMs` whatever the store's timeout is.
 *
 * @param store - the TypeORM store
 * @param tableName - the record table
 * @param countLimit - the most rows each count reads
 * @param timeoutMs - how long the read may take
 * @throws IdempotencyStoreTimeoutError when the database does not answer within `timeoutMs`
 */
export async function readTableHealth(
  store: TypeOrmStoreConnection,
  tableName: string,
  countLimit: number,
  timeoutMs: number,
): Promise<IdempotencyTableHealth> {
  const started = Date.now();
  const deadline = new Deadline('health check', timeoutMs);
  const { rows } = await deadline.race(
    store.runStatement('health check', healthStatement(tableName), [countLimit]),
    'PostgreSQL to answer',
  );
  const row = rows[0];
  return {
    stuckInFlight: Number(row.stuck_in_flight),
    idleOperations: Number(row.idle_operations),
    abandonedOperations: Number(row.abandoned_operations),
    purgeBacklog: Number(row.purge_backlog),
    latencyMs: Date.now() - started,
  };
}
