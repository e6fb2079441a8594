import type { IdempotencyRunSettings } from '../../interfaces/idempotency-record.interface';
import { isolationLevelSql, phaseStatements } from './phase-statements.sql';
import type { PhaseStatementName } from './phase-statements.sql';
import { CONFIRMED, prepareStatements } from './prepared-statement';
import type { PreparedStatement, StatementResult } from './prepared-statement';
import { responseValues, writtenOf } from './record-rows';
import type {
  OperationRecordRow,
  OperationRecordStore,
  OperationStepTransaction,
} from '../../phases/operation-record.store';
import type { TypeOrmStoreConnection } from './store-connection';
import { TypeOrmJobStore } from './typeorm-job.store';
import { wakeTokenOf } from '../../waiting/wake-token';
import type { TypeOrmStoreTransaction } from './typeorm-store-transaction';

/** A local step's transaction on the TypeORM store, with the store transaction it writes in. */
type TypeOrmStepTransaction = OperationStepTransaction & { readonly tx: TypeOrmStoreTransaction };

/** The port this store implements: its methods take their parameter types from it. */
type Port = OperationRecordStore;

/**
 * The statements of operations in phases (docs/design/contract.md#operations-in-phases) on the TypeORM store's record table. Every
 * write is guarded by the owner token and, where a step moves the record on, by the recovery
 * point it expects (compare-and-set): a stale owner, or a second run of a step that already
 * committed, changes nothing. Its methods are arrow-function properties typed by the port's.
 */
export class TypeOrmPhaseStore implements OperationRecordStore {
  private readonly sql: Record<PhaseStatementName, PreparedStatement>;

  /**
   * @param store - the TypeORM store whose DataSource, timeout and connections are used
   * @param tableName - the record table
   * @param jobs - where local steps stage jobs (the table's own jobs table by default)
   */
  constructor(
    private readonly store: TypeOrmStoreConnection,
    tableName: string,
    private readonly jobs: TypeOrmJobStore = new TypeOrmJobStore(store, tableName),
  ) {
    this.sql = prepareStatements(phaseStatements(tableName));
  }

  /** @inheritDoc */
  readonly bind: Port['bind'] = async (ref, operation, input, settings) => {
    const { ttlSeconds, replayHeaders, storeBody, maxResponseBytes } = settings;
    const stored = JSON.stringify({ ttlSeconds, replayHeaders, storeBody, maxResponseBytes });
    const values = [ref.scope, ref.key, ref.ownerToken, operation, JSON.stringify(input ?? null)];
    const { rows } = await this.store.run('bind operation', this.sql.bind, [...values, stored]);
    const row = rows[0];
    if (!row) return undefined;
    return {
      recordId: row.record_id,
      operation: row.operation,
      recoveryPoint: row.recovery_point,
      input: row.operation_input,
      state: row.operation_state ?? {},
      ageSeconds: Number(row.age_seconds),
      resumed: row.resumed === true,
    };
  };

  /** @inheritDoc */
  readonly beginStep: Port['beginStep'] = async (ref, expectedPoint, isolation) => {
    const tx = await this.store.openTransaction();
    const values = [ref.scope, ref.key, ref.ownerToken, expectedPoint];
    const setup = isolation === 'READ COMMITTED' ? undefined : isolationLevelSql(isolation);
    const locked = await tx.lock('lock step', this.sql.lockStep, values, setup);
    if (!locked) return undefined;
    const step: TypeOrmStepTransaction = {
      tx,
      state: locked.rows[0].operation_state ?? {},
      manager: tx.manager,
      stage: (job) => this.jobs.stage(tx, job),
      commit: () => tx.commit(),
      rollback: () => tx.rollback(),
      abandon: () => tx.abandon(),
    };
    return step;
  };

  /** @inheritDoc */
  readonly advance: Port['advance'] = async (ref, expectedPoint, nextPoint, state, step) => {
    const values = [ref.scope, ref.key, ref.ownerToken, expectedPoint, nextPoint, state];
    return (await this.write('advance operation', this.sql.advance, values, step)).rowCount === 1;
  };

  /** @inheritDoc */
  readonly finish: Port['finish'] = async (ref, expected, state, response, ttlSeconds, step) => {
    const guard = [ref.scope, ref.key, ref.ownerToken, expected, state];
    const values = [...guard, ...responseValues(response, ttlSeconds)];
    const announce = ref.announce === true;
    if (announce) values.push(wakeTokenOf(ref.scope, ref.key));
    const statement = announce ? this.sql.finishAnnounced : this.sql.finish;
    return writtenOf(await this.write('finish operation', statement, values, step, true), announce);
  };

  /** In the step's transaction when there is one, else on its own (`confirmed`: see `run`). */
  private write(
    operation: string,
    statement: PreparedStatement,
    values: unknown[],
    step: OperationStepTransaction | undefined,
    confirmed = false,
  ): Promise<StatementResult> {
    const tx = (step as TypeOrmStepTransaction | undefined)?.tx;
    return tx
      ? tx.run(operation, statement, values)
      : this.store.run(operation, statement, values, undefined, confirmed ? CONFIRMED : undefined);
  }

  /** @inheritDoc */
  readonly abandon: Port['abandon'] = async (ref) => {
    const values = [ref.scope, ref.key, ref.ownerToken];
    return (await this.store.run('abandon', this.sql.abandon, values)).rowCount === 1;
  };

  /** @inheritDoc */
  readonly takeOver: Port['takeOver'] = async (...values) =>
    // $1…$4: batchSize, afterSeconds, maxAgeSeconds, lockTimeoutSeconds (the port's order).
    this.rows(await this.store.run('take over', this.sql.takeOver, values));

  /** @inheritDoc */
  readonly abandonOld: Port['abandonOld'] = async (...values) =>
    // $1, $2: batchSize, maxAgeSeconds.
    this.rows(await this.store.run('abandon old', this.sql.abandonOld, values));

  /** @inheritDoc */
  readonly reapExpired: Port['reapExpired'] = async (batchSize) =>
    this.rows(await this.store.run('reap', this.sql.reapExpired, [batchSize]));

  /** @inheritDoc */
  readonly deleteAbandoned: Port['deleteAbandoned'] = async (...values) => {
    // $1, $2: batchSize, retentionSeconds.
    const { rows } = await this.store.run('delete abandoned', this.sql.deleteAbandoned, values);
    return Number(rows[0]?.deleted ?? 0);
  };

  /** @inheritDoc */
  readonly listAbandoned: Port['listAbandoned'] = async (limit) => {
    const { rows } = await this.store.run('list abandoned', this.sql.listAbandoned, [limit]);
    return rows.map((row) => ({
      ...operationOf(row),
      input: row.operation_input,
      state: row.operation_state,
      attempts: Number(row.attempts),
      createdAt: new Date(row.created_at),
      abandonedAt: new Date(row.updated_at),
    }));
  };

  /** @inheritDoc */
  readonly abandonedRecord: Port['abandonedRecord'] = async (scope, key) => {
    const { rows } = await this.store.run('read abandoned', this.sql.abandonedRecord, [scope, key]);
    const row = rows[0];
    return (
      row && {
        recordId: row.record_id,
        fingerprint: row.fingerprint,
        settings: settingsOf(row.operation_settings),
      }
    );
  };

  /** @inheritDoc */
  readonly resolveAbandoned: Port['resolveAbandoned'] = async (scope, key, completion) => {
    const statement = completion ? this.sql.resolveComplete : this.sql.resolveDelete;
    const values = completion
      ? [scope, key, ...responseValues(completion.response, completion.ttlSeconds)]
      : [scope, key];
    if (completion) values.push(completion.record.recordId, completion.record.fingerprint);
    return (await this.store.run('resolve abandoned', statement, values)).rowCount === 1;
  };

  private rows(result: { rows: any[] }): OperationRecordRow[] {
    return result.rows.map((row) => ({
      ...operationOf(row),
      fingerprint: row.fingerprint,
      ownerToken: row.owner_token,
      attempt: Number(row.attempts),
      settings: settingsOf(row.operation_settings),
    }));
  }
}

/** The record and operation a row of the phase statements names. */
function operationOf(row: any) {
  return {
    scope: row.scope as string,
    key: row.idempotency_key as string,
    recordId: row.record_id as string,
    operation: row.operation as string,
    recoveryPoint: row.recovery_point as string | null,
  };
}

/** The route settings stored on a record, or null when it has none (or they are not valid). */
function settingsOf(stored: unknown): IdempotencyRunSettings | null {
  const value = (stored ?? {}) as Partial<IdempotencyRunSettings>;
  const { ttlSeconds, replayHeaders, storeBody, maxResponseBytes } = value;
  if (typeof ttlSeconds !== 'number' || !Array.isArray(replayHeaders)) return null;
  if (!replayHeaders.every((name) => typeof name === 'string')) return null;
  return {
    ttlSeconds,
    replayHeaders,
    // Absent on records bound before these settings: the body is kept, whatever its size.
    ...(typeof storeBody === 'boolean' && { storeBody }),
    ...(typeof maxResponseBytes === 'number' && { maxResponseBytes }),
  };
}
