import type { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { IdempotencyConfigurationError } from '../../config/idempotency-configuration.error';
import { check, checkBoolean, checkNumber, seconds } from '../../config/idempotency.defaults';
import { withoutUndefined } from '../../config/option-validation';
import type { IdempotencyStoreFactory } from '../idempotency-store.factory';
import { TypeOrmIdempotencyStore } from './typeorm-idempotency.store';
import { DEFAULT_TYPEORM_STORE_OPTIONS } from './typeorm-store.defaults';

/** Options of the TypeORM store; each has a default in `DEFAULT_TYPEORM_STORE_OPTIONS`. */
export interface IdempotencyTypeOrmStoreOptions {
  /**
   * The DataSource: the name given to `TypeOrmModule.forRoot({ name })`, or the DataSource
   * itself.
   * @defaultValue the default DataSource
   */
  dataSource?: string | DataSource;
  /**
   * The record table, optionally schema-qualified (`billing.idempotency_records`); its jobs live
   * in `<tableName>_jobs`.
   * @defaultValue `DEFAULT_TYPEORM_STORE_OPTIONS.tableName` (`idempotency_records`)
   */
  tableName?: string;
  /**
   * How long a call to the store on the request path (claim, begin, complete, release, renew)
   * may wait, including for a pooled connection, before it fails closed (503 + `Retry-After` for
   * a claim). Accepted: 0.05 to 300.
   * @defaultValue `DEFAULT_TYPEORM_STORE_OPTIONS.timeoutSeconds` (5)
   */
  timeoutSeconds?: number;
  /**
   * Send the store's statements as named prepared statements, parsed and planned once per
   * connection. Set `false` when connections do not keep their own server session: behind
   * PgBouncer in transaction pooling mode before 1.21, or an embedded PGlite served to several
   * connections.
   * @defaultValue `DEFAULT_TYPEORM_STORE_OPTIONS.preparedStatements` (`true`)
   */
  preparedStatements?: boolean;
  /**
   * How requests waiting for a key in flight (the `wait` option) learn that it settled on
   * another instance: `'auto'` listens on one dedicated connection (`LISTEN/NOTIFY`, opened at
   * the first request of a route that may wait) unless a self-test shows notifications cannot
   * reach it, as behind PgBouncer in transaction pooling mode; then, or with `'poll'`, waiters
   * look again every `wait.pollIntervalSeconds`.
   * @defaultValue `DEFAULT_TYPEORM_STORE_OPTIONS.wakeUps` (`'auto'`)
   */
  wakeUps?: 'auto' | 'poll';
}

const TABLE_NAME = /^([a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}$/;

const TIMEOUT = seconds(0.05, 300, DEFAULT_TYPEORM_STORE_OPTIONS.timeoutSeconds);

/**
 * The TypeORM store for the module's `store` option: PostgreSQL through the application's
 * DataSource (found when the application bootstraps, so `TypeOrmModule.forRoot()` may come in any
 * order). `store: 'typeorm'` is the same with every default.
 *
 * @example
 * IdempotencyModule.forRoot({ store: typeOrmStore({ dataSource: 'payments', tableName: 'billing.idempotency_records' }) })
 * @param options - any subset; the rest come from `DEFAULT_TYPEORM_STORE_OPTIONS`
 * @throws IdempotencyConfigurationError when an option is invalid (numbers and booleans read from
 *   the environment as strings are accepted)
 */
export function typeOrmStore(
  options: IdempotencyTypeOrmStoreOptions = {},
): IdempotencyStoreFactory {
  const { tableName, dataSource, wakeUps, ...rest } = {
    ...DEFAULT_TYPEORM_STORE_OPTIONS,
    ...withoutUndefined(options),
  };
  check(
    typeof tableName === 'string' && TABLE_NAME.test(tableName),
    'tableName',
    tableName,
    'Use a lower-case SQL identifier, optionally schema-qualified, e.g. "idempotency_records".',
  );
  check(
    dataSource === undefined ||
      (typeof dataSource === 'string' && dataSource !== '') ||
      typeof (dataSource as DataSource | null)?.createQueryRunner === 'function',
    'dataSource',
    dataSource,
    'Use the name given to TypeOrmModule.forRoot({ name }), the DataSource itself, or leave it ' +
      'out for the default DataSource.',
  );
  const timeoutSeconds = checkNumber('timeoutSeconds', rest.timeoutSeconds, TIMEOUT);
  const preparedStatements = checkBoolean(
    'preparedStatements',
    rest.preparedStatements,
    'Use true, or false behind PgBouncer in transaction pooling mode before 1.21.',
  );
  check(
    wakeUps === 'auto' || wakeUps === 'poll',
    'wakeUps',
    wakeUps,
    'Use "auto" (LISTEN/NOTIFY where it works, else polling) or "poll".',
  );
  return {
    create: (moduleRef) =>
      new TypeOrmIdempotencyStore(
        typeof dataSource === 'object' ? dataSource : () => findDataSource(dataSource, moduleRef),
        tableName,
        { timeoutMs: timeoutSeconds * 1000, preparedStatements, wakeUps },
      ),
  };
}

/** The application's DataSource of that name (the default one when undefined). */
function findDataSource(name: string | undefined, moduleRef: ModuleRef): DataSource {
  let dataSource: DataSource | undefined;
  try {
    dataSource = moduleRef.get(getDataSourceToken(name), { strict: false });
  } catch {
    // Not registered: said below, as for a provider that holds nothing.
  }
  if (!dataSource) throw IdempotencyConfigurationError.dataSourceMissing(name);
  return dataSource;
}
