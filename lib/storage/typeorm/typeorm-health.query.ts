import type { IdempotencyTableHealth } from '../idempotency-store.capabilities';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmStoreConnection } from './store-connection';
import { Deadline } from './with-deadline';

/**
 * Reads the record table's health through the store's statement runner (its pool, its own
 * timeout), answering within `timeoutMs` whatever the store's timeout is.
 *
 * @param store - the TypeORM store
 * @param statement - the record table's health statement (`healthSql`)
 * @param countLimit - the most rows each count reads
 * @param timeoutMs - how long the read may take
 * @throws IdempotencyStoreTimeoutError when the database does not answer within `timeoutMs`
 */
export async function readTableHealth(
  store: TypeOrmStoreConnection,
  statement: PreparedStatement,
  countLimit: number,
  timeoutMs: number,
): Promise<IdempotencyTableHealth> {
  const started = Date.now();
  const deadline = new Deadline('health check', timeoutMs);
  const read = store.run('health check', statement, [countLimit]);
  const [row] = (await deadline.race(read, 'PostgreSQL to answer')).rows;
  return {
    stuckInFlight: Number(row.stuck_in_flight),
    idleOperations: Number(row.idle_operations),
    abandonedOperations: Number(row.abandoned_operations),
    purgeBacklog: Number(row.purge_backlog),
    latencyMs: Date.now() - started,
  };
}
