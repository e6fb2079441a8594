/**
 * Each entry point exports exactly this list of names: adding or removing an export must be
 * acknowledged here (STYLE: explicit named exports, snapshot of the public list). The root is
 * the core, small enough to learn in a sitting: at most 40 names, types included.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as root from '../../lib';
import * as phases from '../../lib/phases';
import * as typeorm from '../../lib/storage/typeorm';
import * as testing from '../../lib/testing';
import * as webhooks from '../../lib/webhooks';
import * as microservices from '../../lib/microservices';
import * as graphql from '../../lib/graphql';
import * as cli from '../../lib/cli';

/** Every name an entry file exports, values and types, read from its source. */
function exportedNames(file: string): string[] {
  const source = readFileSync(join(__dirname, '../../lib', file), 'utf8');
  const names: string[] = [];
  for (const [, list] of source.matchAll(/export (?:type )?\{([^}]*)\}/g)) {
    for (const item of list.split(',')) {
      const name = item
        .trim()
        .split(/\s+as\s+/)
        .pop();
      if (name) names.push(name);
    }
  }
  return names.sort();
}

const ROOT_VALUES = [
  'DEFAULT_IDEMPOTENCY_OPTIONS',
  'IDEMPOTENT_REPLAYED_HEADER',
  'IdempotencyConfigurationError',
  'IdempotencyContext',
  'IdempotencyError',
  'IdempotencyEvents',
  'IdempotencyExceptionFilter',
  'IdempotencyGuard',
  'IdempotencyInterceptor',
  'IdempotencyModule',
  'IdempotencyProblemException',
  'IdempotencyPurgeService',
  'IdempotencyStore',
  'Idempotent',
  'MemoryIdempotencyStore',
  'PROBLEM_CONTENT_TYPE',
  'SHARED_SCOPE',
  'SkipIdempotency',
];

const ROOT_TYPES = [
  'ClaimRequest',
  'ClaimResult',
  'IdempotencyErrorBody',
  'IdempotencyErrorBodyRenderer',
  'IdempotencyErrorCode',
  'IdempotencyEvent',
  'IdempotencyEventListener',
  'IdempotencyModuleExtras',
  'IdempotencyModuleOptions',
  'IdempotencyOptionsFactory',
  'IdempotencyProblem',
  'IdempotencyPurgeOptions',
  'IdempotencyRecordRef',
  'IdempotencyRecordStatus',
  'IdempotencyReplayCacheOptions',
  'IdempotencyRequestIdentity',
  'IdempotencyScopeResolver',
  'IdempotencyStoreFactory',
  'IdempotencyStoreTransaction',
  'IdempotencyRouteOptions',
  'StoredResponse',
];

describe('public API', () => {
  it('the root exports exactly the acknowledged names, at most 40', () => {
    expect(Object.keys(root).sort()).toEqual(ROOT_VALUES);
    expect(exportedNames('index.ts')).toEqual([...ROOT_VALUES, ...ROOT_TYPES].sort());
    expect(exportedNames('index.ts').length).toBeLessThanOrEqual(40);
  });

  it('nest-idempotency/typeorm exports the store, its entities and migrations', () => {
    expect(Object.keys(typeorm).sort()).toEqual(
      [
        'AddOperationSettingsToIdempotencyRecords1764288000000',
        'AddPhasesToIdempotencyRecords1764028800000',
        'AddPurgeAfterToIdempotencyRecords1764201600000',
        'CreateIdempotencyRecords1732233600000',
        'DEFAULT_TYPEORM_STORE_OPTIONS',
        'IdempotencyJobEntity',
        'IdempotencyRecordEntity',
        'IdempotencyStoreTimeoutError',
        'TypeOrmIdempotencyStore',
        'createIdempotencyOperationSettingsMigration',
        'createIdempotencyPhasesMigration',
        'createIdempotencyPurgeAfterMigration',
        'createIdempotencyRecordsMigration',
        'isDatabaseUnavailable',
        'typeOrmStore',
      ].sort(),
    );
  });

  it('nest-idempotency/phases exports operations in phases and staged jobs', () => {
    expect(Object.keys(phases).sort()).toEqual(
      [
        'DEFAULT_IDEMPOTENCY_PHASES_OPTIONS',
        'IdempotencyCompleter',
        'IdempotentJobHandler',
        'IdempotencyJobs',
        'IdempotencyPhasesModule',
        'IdempotentOperation',
        'IdempotencyOperations',
        'defineSteps',
        'proceed',
        'respond',
        'retryLater',
      ].sort(),
    );
  });

  it('nest-idempotency/testing exports the store conformance suite and its types', () => {
    expect(Object.keys(testing)).toEqual(['describeIdempotencyStoreConformance']);
    expect(typeof testing.describeIdempotencyStoreConformance).toBe('function');
    expect(exportedNames('testing/index.ts')).toEqual([
      'IdempotencyStoreTestFunctions',
      'IdempotencyStoreUnderTest',
      'describeIdempotencyStoreConformance',
    ]);
  });

  it('nest-idempotency/webhooks exports the webhook decorator, its defaults and its types', () => {
    expect(Object.keys(webhooks).sort()).toEqual([
      'DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS',
      'IDEMPOTENCY_WEBHOOK_CLOCK',
      'IdempotentWebhook',
    ]);
    expect(exportedNames('webhooks/index.ts')).toEqual(
      [
        'DEFAULT_IDEMPOTENCY_WEBHOOK_OPTIONS',
        'IDEMPOTENCY_WEBHOOK_CLOCK',
        'IdempotentWebhook',
        'IdempotencyHmacSignature',
        'IdempotencyStandardWebhooksSignature',
        'IdempotencyStripeSignature',
        'IdempotencyWebhookClock',
        'IdempotencyWebhookEvent',
        'IdempotencyWebhookSecretList',
        'IdempotencyWebhookSecrets',
        'IdempotencyWebhookSecretsFactory',
        'IdempotencyWebhookSignature',
        'IdempotentWebhookOptions',
        'IdempotentWebhookRouteOptions',
      ].sort(),
    );
  });

  it('nest-idempotency/graphql exports the mutation decorator and its options', () => {
    expect(Object.keys(graphql)).toEqual(['IdempotentMutation']);
    expect(exportedNames('graphql/index.ts')).toEqual(
      ['IdempotentMutation', 'IdempotentMutationOptions', 'IdempotentMutationRouteOptions'].sort(),
    );
  });

  it('nest-idempotency/microservices exports the message decorator, its defaults and its types', () => {
    expect(Object.keys(microservices).sort()).toEqual([
      'DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS',
      'IdempotentMessage',
    ]);
    expect(exportedNames('microservices/index.ts')).toEqual(
      [
        'DEFAULT_IDEMPOTENCY_MESSAGE_OPTIONS',
        'IdempotentMessage',
        'IdempotencyMessage',
        'IdempotencyMessageKey',
        'IdempotencyMessageRefusal',
        'IdempotencyMessageScope',
        'IdempotentMessageOptions',
        'IdempotentMessageRouteOptions',
      ].sort(),
    );
    for (const value of Object.values(microservices)) expect(value).toBeDefined();
  });

  it('nest-idempotency/cli exports the operator tool and the store port it uses', () => {
    expect(Object.keys(cli)).toEqual(['runIdempotencyCli']);
    expect(exportedNames('cli/index.ts')).toEqual(
      [
        'IdempotencyCliOptions',
        'IdempotencyOperatorListKind',
        'IdempotencyOperatorRecord',
        'IdempotencyOperatorReleaseResult',
        'IdempotencyStoreOperator',
        'runIdempotencyCli',
      ].sort(),
    );
  });

  it('exports no undefined values', () => {
    for (const [name, value] of Object.entries({
      ...root,
      ...typeorm,
      ...phases,
      ...webhooks,
      ...graphql,
    })) {
      expect([name, value === undefined]).toEqual([name, false]);
    }
  });

  it('exports the documented constant values', () => {
    expect(root.IDEMPOTENT_REPLAYED_HEADER).toBe('Idempotent-Replayed');
    expect(root.PROBLEM_CONTENT_TYPE).toBe('application/problem+json');
  });
});
