import { jobsTableNameOf, quoteTableName } from './idempotency-table.sql';

/**
 * The text of every statement `TypeOrmJobStore` sends on `<tableName>_jobs`, by name.
 * @param tableName - the record table, as configured (its jobs table is quoted here)
 */
export function jobStatements(tableName: string) {
  const j = quoteTableName(jobsTableNameOf(tableName));
  const columns = `id::text AS id, name, args, job_key, attempts, origin_scope, origin_key`;
  const cutoff = `coalesce($2::timestamptz, statement_timestamp())`;
  return {
    stage: `
        INSERT INTO ${j} (name, args, job_key, origin_scope, origin_key)
        VALUES ($1, $2::jsonb, $3, $4, $5)`,
    // Due by the cutoff: the moment the drain began ($2), so a job that failed during this
    // drain waits for the next one even with no backoff. Rows not due yet come after the due
    // ones and tell an idle drainer when to look again.
    findDue: `
        SELECT id::text AS id, run_after <= coalesce($1::timestamptz, statement_timestamp()) AS due,
               EXTRACT(EPOCH FROM run_after - statement_timestamp())::float8 AS due_in,
               coalesce($1::timestamptz, statement_timestamp())::text AS cutoff
          FROM ${j}
         WHERE status = 'pending'
         ORDER BY run_after, id
         LIMIT $2`,
    // One committed statement: counts the delivery and leases the job before any handler runs.
    // A job that already started maxAttempts deliveries (the last without a recorded outcome)
    // is made dead instead.
    claim: `
        UPDATE ${j}
           SET attempts = CASE WHEN attempts >= $3 THEN attempts ELSE attempts + 1 END,
               status = CASE WHEN attempts >= $3 THEN 'dead' ELSE 'pending' END,
               last_error = CASE WHEN attempts >= $3 THEN $5 ELSE last_error END,
               run_after = clock_timestamp() + $4::float8 * interval '1 second',
               updated_at = clock_timestamp()
         WHERE id = (SELECT id FROM ${j}
                      WHERE id = $1::bigint AND status = 'pending' AND run_after <= ${cutoff}
                        FOR UPDATE SKIP LOCKED)
        RETURNING ${columns}, status`,
    // In the delivery's transaction: the row stays locked (and deleted) until it commits. It
    // waits for a lock rather than skipping it: another drainer's claim statement may hold the
    // row for a moment (it locks, then finds the job no longer due), and skipping would leave
    // a job this drainer claimed undelivered until its hold ran out. The claimed attempt, checked
    // once the lock is had, still refuses a job another drainer has claimed since.
    lock: `
        DELETE FROM ${j}
         WHERE id = (SELECT id FROM ${j}
                      WHERE id = $1::bigint AND attempts = $2 AND status = 'pending'
                        FOR UPDATE)`,
    fail: `
        UPDATE ${j} SET last_error = $3,
               run_after = clock_timestamp() + $4::float8 * interval '1 second',
               status = CASE WHEN attempts >= $5 THEN 'dead' ELSE 'pending' END,
               updated_at = clock_timestamp()
         WHERE id = $1::bigint AND attempts = $2 AND status = 'pending'
        RETURNING status`,
    listDead: `
        SELECT ${columns}, last_error, created_at, updated_at FROM ${j}
         WHERE status = 'dead' ORDER BY id LIMIT $1`,
    retryDead: `
        UPDATE ${j} SET status = 'pending', attempts = 0, run_after = clock_timestamp(),
               updated_at = clock_timestamp()
         WHERE id = $1::bigint AND status = 'dead'`,
    deleteDead: `DELETE FROM ${j} WHERE id = $1::bigint AND status = 'dead'`,
  };
}

/** The name of one of the job store's statements. */
export type JobStatementName = keyof ReturnType<typeof jobStatements>;
