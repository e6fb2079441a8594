// The statements of wake-ups over PostgreSQL `LISTEN/NOTIFY` (see `TypeOrmWakeUps`), and the
// announcing ends of the writes that settle a record. `channel` is `wakeUpChannelOf(tableName)`.

/**
 * The end of a statement that announces its write: one `pg_notify` per row of the CTE `written`
 * (none when the write changed nothing), and their count as `n`. In a transaction the
 * notification is sent at its commit.
 * @param channel - `wakeUpChannelOf(tableName)`
 * @param payload - the parameter holding `wakeTokenOf(scope, key)`, e.g. `$4`
 * @param count - how `n` is made of the count (`failUnlessWritten`)
 */
export function notifyWritten(
  channel: string,
  payload: string,
  count: (rows: string) => string = (rows) => rows,
): string {
  return `
        SELECT ${count('count(*)::int')} AS n FROM written,
               LATERAL (SELECT pg_notify('${channel}', ${payload}::text)) AS announced`;
}

/**
 * `n` made of a write's count so that a write that changed nothing fails (division by zero,
 * SQLSTATE 22012): a transaction's completion sent with its `COMMIT`, which PostgreSQL then
 * turns into a rollback.
 */
export const failUnlessWritten = (rows: string): string => `1 / ${rows}`;

/** SQLSTATE of a `failUnlessWritten` statement that changed nothing. */
export const NOTHING_WRITTEN = '22012';

/**
 * A write (an `UPDATE` or `DELETE` without `RETURNING`) that announces itself as it changes a
 * record: the same round trip, one more statement text.
 */
export const announcedWrite = (write: string, channel: string, payload: string): string =>
  `WITH written AS (${write} RETURNING 1) ${notifyWritten(channel, payload)}`;

/**
 * The statement that announces a settlement on `channel` (the self-test sends it too); the
 * settling statements of routes that may wait embed the same `pg_notify` call.
 */
export const notifySql = (channel: string): string => `SELECT pg_notify('${channel}', $1::text)`;
