/** The one place the TypeORM store's defaults live. The README's table is tested against it. */
export const DEFAULT_TYPEORM_STORE_OPTIONS = Object.freeze({
  tableName: 'idempotency_records',
  timeoutSeconds: 5,
  preparedStatements: true,
});
