import type { DeadJob } from '../../jobs/staged-job.interface';
import { jobsTableNameOf, quoteTableName } from './idempotency-table.sql';
import { prepareStatement } from './prepared-statement';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmIdempotencyStore } from './typeorm-idempotency.store';
import type { TypeOrmStoreTransaction } from './typeorm-store-transaction';

/** A job row as the drainer takes it. */
export interface TakenJob {
  id: string;
  name: string;
  args: unknown;
  key: string;
  /** Failed deliveries so far. */
  attempts: number;
  originScope: string;
  originKey: string;
}

/** A job to stage, with where it came from. */
export interface NewJob {
  name: string;
  args: unknown;
  key: string;
  originScope: string;
  originKey: string;
}

/**
 * The statements of staged jobs (SPEC §8) on `<tableName>_jobs`. Jobs are staged in a local
 * step's transaction and taken by a drainer's transaction with `FOR UPDATE SKIP LOCKED`; the
 * drainer deletes exactly the rows it took (by id), never a range, so a row with a lower id that
 * commits late is still delivered.
 */
export class TypeOrmJobStore {
  private readonly sql: Record<string, PreparedStatement>;

  /**
   * @param store - the TypeORM store whose DataSource, timeout and connections are used
   * @param tableName - the record table; jobs live in `<tableName>_jobs`
   */
  constructor(
    private readonly store: TypeOrmIdempotencyStore,
    tableName: string,
  ) {
    const j = quoteTableName(jobsTableNameOf(tableName));
    const columns = `id::text AS id, name, args, job_key, attempts, origin_scope, origin_key`;
    const sql = {
      stage: `
        INSERT INTO ${j} (name, args, job_key, origin_scope, origin_key)
        VALUES ($1, $2::jsonb, $3, $4, $5)`,
      // Due by the cutoff: the moment the drain began ($2), so a job that failed during this
      // drain waits for the next one even with no backoff.
      take: `
        SELECT ${columns}, coalesce($2::timestamptz, statement_timestamp())::text AS cutoff
          FROM ${j}
         WHERE status = 'pending' AND run_after <= coalesce($2::timestamptz, statement_timestamp())
         ORDER BY run_after, id
         LIMIT $1 FOR UPDATE SKIP LOCKED`,
      delete: `DELETE FROM ${j} WHERE id = ANY($1::bigint[])`,
      fail: `
        UPDATE ${j} SET attempts = attempts + 1, last_error = $2,
               run_after = clock_timestamp() + $3::float8 * interval '1 second',
               status = CASE WHEN attempts + 1 >= $4 THEN 'dead' ELSE 'pending' END,
               updated_at = clock_timestamp()
         WHERE id = $1::bigint
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
    this.sql = Object.fromEntries(
      Object.entries(sql).map(([name, text]) => [name, prepareStatement(text)]),
    );
  }

  /** Writes a job in a local step's transaction. */
  async stage(tx: TypeOrmStoreTransaction, job: NewJob): Promise<void> {
    await tx.run('stage job', this.sql.stage, [
      job.name,
      JSON.stringify(job.args ?? null),
      job.key,
      job.originScope,
      job.originKey,
    ]);
  }

  /** Opens a drain's transaction (READ COMMITTED, the default). */
  begin(): Promise<TypeOrmStoreTransaction> {
    return this.store.openTransaction();
  }

  /**
   * Takes up to `batchSize` jobs due by `cutoff` (now, when not given), locking them; jobs
   * another drainer holds are skipped.
   * @returns the jobs, and the cutoff used (pass it to the drain's later batches)
   */
  async take(
    tx: TypeOrmStoreTransaction,
    batchSize: number,
    cutoff: string | null,
  ): Promise<{ jobs: TakenJob[]; cutoff: string | null }> {
    const { rows } = await tx.run('take jobs', this.sql.take, [batchSize, cutoff]);
    const jobs = rows.map((row) => ({
      id: row.id,
      name: row.name,
      args: row.args,
      key: row.job_key,
      attempts: Number(row.attempts),
      originScope: row.origin_scope,
      originKey: row.origin_key,
    }));
    return { jobs, cutoff: rows[0]?.cutoff ?? cutoff };
  }

  /** Deletes exactly these delivered jobs. */
  async delete(tx: TypeOrmStoreTransaction, ids: string[]): Promise<void> {
    if (ids.length > 0) await tx.run('delete jobs', this.sql.delete, [ids]);
  }

  /**
   * Records a failed delivery: the job waits `delaySeconds`, or is kept as dead once it has
   * failed `maxAttempts` times.
   * @returns whether the job is now dead
   */
  async fail(
    tx: TypeOrmStoreTransaction,
    id: string,
    error: string,
    delaySeconds: number,
    maxAttempts: number,
  ): Promise<boolean> {
    const { rows } = await tx.run('fail job', this.sql.fail, [
      id,
      error,
      delaySeconds,
      maxAttempts,
    ]);
    return rows[0]?.status === 'dead';
  }

  /** Dead jobs, oldest first. */
  async listDead(limit: number): Promise<DeadJob[]> {
    const { rows } = await this.store.runStatement('list dead jobs', this.sql.listDead, [limit]);
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      args: row.args,
      key: row.job_key,
      attempts: Number(row.attempts),
      lastError: row.last_error,
      origin: { scope: row.origin_scope, key: row.origin_key },
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
    }));
  }

  /** Puts a dead job back in the queue, due now, with its attempts reset. */
  async retryDead(id: string): Promise<boolean> {
    return (
      (await this.store.runStatement('retry dead job', this.sql.retryDead, [id])).rowCount === 1
    );
  }

  /** Deletes a dead job for good. */
  async deleteDead(id: string): Promise<boolean> {
    return (
      (await this.store.runStatement('delete dead job', this.sql.deleteDead, [id])).rowCount === 1
    );
  }
}
