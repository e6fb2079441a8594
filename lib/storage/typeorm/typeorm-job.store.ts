import type { NewStagedJob } from '../../phases/operation-record.store';
import type { StagedJobStore } from '../../phases/jobs/staged-job.store';
import { jobStatements } from './job-statements.sql';
import type { JobStatementName } from './job-statements.sql';
import { prepareStatements } from './prepared-statement';
import type { PreparedStatement } from './prepared-statement';
import type { TypeOrmStoreConnection } from './store-connection';
import type { TypeOrmStoreTransaction } from './typeorm-store-transaction';

/** The port this store implements: its methods take their parameter types from it. */
type Port = StagedJobStore;

/**
 * The statements of staged jobs (docs/design/contract.md#operations-in-phases) on `<tableName>_jobs`, and the drainer's port on them
 * (see `StagedJobStore` for the contract). Jobs are staged in a local step's transaction. A
 * drainer looks due jobs up with a plain read, then for each: claims it in one committed
 * statement (`FOR UPDATE SKIP LOCKED`; the attempt is counted there), and delivers it in a
 * transaction of its own that locks and deletes exactly that row, by id and claimed attempt.
 * The port's methods are arrow-function properties typed by it.
 */
export class TypeOrmJobStore implements StagedJobStore {
  private readonly sql: Record<JobStatementName, PreparedStatement>;
  private readonly stagedListeners = new Set<() => void>();

  /** Two store timeouts (to begin the delivery's transaction and lock the job) and a second. */
  get claimHoldSeconds(): number {
    return (2 * this.store.timeoutMs) / 1000 + 1;
  }

  /**
   * @param store - the TypeORM store whose DataSource, timeout and connections are used
   * @param tableName - the record table; jobs live in `<tableName>_jobs`
   */
  constructor(
    private readonly store: TypeOrmStoreConnection,
    tableName: string,
  ) {
    this.sql = prepareStatements(jobStatements(tableName));
  }

  /** Writes a job in a local step's transaction, and tells this process's drainer. */
  async stage(tx: TypeOrmStoreTransaction, job: NewStagedJob): Promise<void> {
    const { name, args, key, origin } = job;
    const values = [name, JSON.stringify(args ?? null), key, origin.scope, origin.key];
    await tx.run('stage job', this.sql.stage, values);
    for (const listener of this.stagedListeners) {
      try {
        listener();
      } catch {
        // A hint only: the drainer polls anyway.
      }
    }
  }

  /** @inheritDoc */
  readonly onStaged: Port['onStaged'] = (listener) => {
    this.stagedListeners.add(listener);
    return () => this.stagedListeners.delete(listener);
  };

  /** @inheritDoc */
  readonly findDue: Port['findDue'] = async (limit, cutoff) => {
    const { rows } = await this.store.run('find due jobs', this.sql.findDue, [cutoff, limit]);
    const ids: string[] = [];
    let nextDueInSeconds: number | undefined;
    for (const row of rows) {
      if (row.due) ids.push(row.id);
      else nextDueInSeconds ??= Number(row.due_in);
    }
    return { ids, cutoff: rows[0]?.cutoff ?? cutoff, nextDueInSeconds };
  };

  /** @inheritDoc */
  readonly claim: Port['claim'] = async (...given) => {
    // $1…$4: id, cutoff, maxAttempts, leaseSeconds (the port's order).
    const row = (await this.store.run('claim job', this.sql.claim, [...given, EXHAUSTED])).rows[0];
    return (
      row && {
        ...jobOf(row),
        attempt: Number(row.attempts),
        origin: { scope: row.origin_scope, key: row.origin_key },
        exhausted: row.status === 'dead',
      }
    );
  };

  /** @inheritDoc */
  readonly deliver: Port['deliver'] = async (job) => {
    const tx = await this.store.openTransaction();
    // The transaction is the delivery: its abandon() closes the connection and ends its backend,
    // even inside a handler's long statement.
    return (await tx.lock('lock job', this.sql.lock, [job.id, job.attempt])) && tx;
  };

  /** @inheritDoc */
  readonly fail: Port['fail'] = async (job, error, delaySeconds, maxAttempts) => {
    const values = [job.id, job.attempt, error, delaySeconds, maxAttempts];
    // The statement sets the status to 'dead' or 'pending' and returns it; no row: 'gone'.
    return (await this.store.run('fail job', this.sql.fail, values)).rows[0]?.status ?? 'gone';
  };

  /** @inheritDoc */
  readonly listDead: Port['listDead'] = async (limit) => {
    const { rows } = await this.store.run('list dead jobs', this.sql.listDead, [limit]);
    return rows.map((row) => ({
      ...jobOf(row),
      attempts: Number(row.attempts),
      lastError: row.last_error,
      origin: { scope: row.origin_scope, key: row.origin_key },
      createdAt: new Date(row.created_at),
      updatedAt: new Date(row.updated_at),
    }));
  };

  /** @inheritDoc */
  readonly retryDead: Port['retryDead'] = async (id) =>
    (await this.store.run('retry dead job', this.sql.retryDead, [id])).rowCount === 1;

  /** @inheritDoc */
  readonly deleteDead: Port['deleteDead'] = async (id) =>
    (await this.store.run('delete dead job', this.sql.deleteDead, [id])).rowCount === 1;
}

/** The error kept on a job made dead by its claim: its last delivery left no outcome. */
const EXHAUSTED =
  'nest-idempotency: no outcome was recorded for the last delivery (the drainer stopped, lost ' +
  'its connection or could not write the failure), and no attempts are left';

/** The job a row of the job statements names. */
function jobOf(row: any) {
  return {
    id: row.id as string,
    name: row.name as string,
    args: row.args,
    key: row.job_key as string,
  };
}
