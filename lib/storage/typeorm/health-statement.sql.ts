import { quoteTableName } from './idempotency-table.sql';

/**
 * One statement, four counts, each bounded by `$1` rows so that a check stays cheap on a large
 * table. The conditions are those of the store's own statements (claim, purge, completer), on
 * the database clock.
 * @param tableName - the record table, as configured (quoted here)
 */
export function healthSql(tableName: string): string {
  const t = quoteTableName(tableName);
  const at = 'statement_timestamp()';
  const bounded = (where: string) =>
    `(SELECT count(*) FROM (SELECT 1 FROM ${t} r WHERE ${where} LIMIT $1) s)::int`;
  return `
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
           )} AS purge_backlog`;
}
