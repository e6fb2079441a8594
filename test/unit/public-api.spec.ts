/**
 * The package root exports exactly this list of runtime names: adding or removing an export
 * must be acknowledged here (STYLE: explicit named exports, snapshot of the public list).
 */
import * as lib from '../../lib';

describe('public API', () => {
  const api = lib as unknown as Record<string, unknown>;

  it('exports exactly the acknowledged names', () => {
    expect(Object.keys(api).sort()).toEqual([
      'AddOperationSettingsToIdempotencyRecords1764288000000',
      'AddPhasesToIdempotencyRecords1764028800000',
      'AddPurgeAfterToIdempotencyRecords1764201600000',
      'CreateIdempotencyRecords1732233600000',
      'DEFAULT_IDEMPOTENCY_OPTIONS',
      'IDEMPOTENCY_OPTIONS',
      'IDEMPOTENCY_PURGE_INTERVAL',
      'IDEMPOTENT_REPLAYED_HEADER',
      'IdempotencyCompleter',
      'IdempotencyConfigurationError',
      'IdempotencyContext',
      'IdempotencyError',
      'IdempotencyEvents',
      'IdempotencyExceptionFilter',
      'IdempotencyGuard',
      'IdempotencyInterceptor',
      'IdempotencyJobEntity',
      'IdempotencyJobHandler',
      'IdempotencyJobs',
      'IdempotencyModule',
      'IdempotencyProblemException',
      'IdempotencyPurgeService',
      'IdempotencyRecordEntity',
      'IdempotencyStore',
      'IdempotencyStoreTimeoutError',
      'Idempotent',
      'IdempotentOperation',
      'IdempotentOperations',
      'MemoryIdempotencyStore',
      'PROBLEM_CONTENT_TYPE',
      'SkipIdempotency',
      'TypeOrmIdempotencyStore',
      'createIdempotencyOperationSettingsMigration',
      'createIdempotencyPhasesMigration',
      'createIdempotencyPurgeAfterMigration',
      'createIdempotencyRecordsMigration',
      'foreignStep',
      'isDatabaseUnavailable',
      'localStep',
      'proceed',
      'resolveIdempotencyOptions',
      'respond',
      'retryLater',
    ]);
  });

  it('exports no undefined values', () => {
    for (const [name, value] of Object.entries(api)) {
      expect([name, value === undefined]).toEqual([name, false]);
    }
  });

  it('exports the documented constant values', () => {
    expect(api.IDEMPOTENT_REPLAYED_HEADER).toBe('Idempotent-Replayed');
    expect(api.PROBLEM_CONTENT_TYPE).toBe('application/problem+json');
  });
});
