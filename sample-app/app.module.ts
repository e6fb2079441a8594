import { Module, ValidationPipe } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { APP_INTERCEPTOR, APP_PIPE } from '@nestjs/core';
import { TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CreateIdempotencyRecords1732233600000, typeOrmStore } from '../lib/storage/typeorm';
import { IdempotencyModule } from '../lib';
import { IdempotencyPhasesModule } from '../lib/phases';
import { IdempotencyHealthIndicator } from '../lib/health';
import { readAccountId } from './accounts/account-id';
import { CreatePayments1763769600000 } from './database/create-payments.migration';
import { DatabaseUnavailableInterceptor } from './database/database-unavailable.interceptor';
import { AddPaymentPhases1764028800000 } from './database/add-payment-phases.migration';
import { APP_POOL_SIZE } from './database/pool-sizes';
import { HealthController } from './health/health.controller';
import { PaymentEntity } from './payments/payment.entity';
import { PaymentsModule } from './payments/payments.module';
import { CreateProviderTables1763769600001 } from './provider/create-provider-tables.migration';
import { ProviderChargeEntity } from './provider/provider-charge.entity';
import { chargeTiming } from './provider/provider.constants';
import { ProviderModule } from './provider/provider.module';
import { ReceiptEntity } from './receipts/receipt.entity';
import { RefundEntity } from './refunds/refund.entity';
import type { SampleAppConfig } from './config/sample-app.config';
import { CrashModule } from './crash/crash.module';
import { DEFAULT_WEBHOOK_SECRET } from './config/sample-app.config';
import { PROVIDER_WEBHOOK_SECRETS } from './webhooks/provider-webhook.constants';

/** What the sample app module needs to know; the databases are already reachable. */
export interface SampleAppModuleConfig {
  /** PostgreSQL URL of the app (payments, refunds, receipts, idempotency records, provider). */
  databaseUrl: string;
  /**
   * The database is the embedded PGlite. Its socket server runs every connection in one
   * session and interleaves their protocol messages (a second connection's named statement
   * already exists, an unnamed portal vanishes under another's), so the pool has one connection.
   */
  embedded?: boolean;
  ttlSeconds: number;
  lockTimeoutSeconds: number;
  purgeIntervalSeconds: number;
  providerLatencyMs: number;
  completerIntervalSeconds?: number;
  completerAfterSeconds?: number;
  jobsIntervalSeconds?: number;
  /** The library's `preparedStatements` (`false` behind PgBouncer's transaction pooling). */
  preparedStatements?: boolean;
  /** The provider webhook's signing secrets (`WEBHOOK_SECRET`); default `whsec_sample`. */
  webhookSecrets?: string[];
  crash?: SampleAppConfig['crash'];
}

/** The root module of the sample app. Build it with `createAppModule()`. */
@Module({})
export class AppModule {}

/**
 * Builds the sample app's root module. The schema is created on start by migrations (never
 * `synchronize`): the library's record and jobs tables, the app's tables and the fake
 * provider's, on one DataSource. With `POST /payments` in phases no transaction is open while
 * the provider is called, so the provider needs no pool (or embedded database) of its own.
 *
 * @param config - database URL, idempotency settings, provider latency and crash hooks
 * @returns the module to give to `NestFactory.create()` or `Test.createTestingModule()`
 */
export function createAppModule(config: SampleAppModuleConfig): DynamicModule {
  const charge = chargeTiming(config.lockTimeoutSeconds);
  return {
    module: AppModule,
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: config.databaseUrl,
        entities: [PaymentEntity, RefundEntity, ReceiptEntity, ProviderChargeEntity],
        migrations: [
          CreateIdempotencyRecords1732233600000,
          CreatePayments1763769600000,
          CreateProviderTables1763769600001,
          AddPaymentPhases1764028800000,
        ],
        migrationsRun: true,
        synchronize: false,
        logging: false,
        extra: { max: config.embedded ? 1 : APP_POOL_SIZE },
      }),
      IdempotencyModule.forRoot({
        // The account the guard required: a request without one never reaches the library.
        request: { scope: (request) => readAccountId(request) },
        responses: { ttlSeconds: config.ttlSeconds },
        execution: { lockTimeoutSeconds: config.lockTimeoutSeconds },
        purge: { intervalSeconds: config.purgeIntervalSeconds },
        store: typeOrmStore({ preparedStatements: config.preparedStatements ?? true }),
      }),
      IdempotencyPhasesModule.forRoot({
        foreignStepMarginSeconds: charge.marginSeconds,
        completer: {
          intervalSeconds: config.completerIntervalSeconds,
          afterSeconds: config.completerAfterSeconds,
        },
        jobs: { intervalSeconds: config.jobsIntervalSeconds },
      }),
      ProviderModule.register(config.providerLatencyMs, charge.timeoutSeconds),
      CrashModule.register(config.crash),
      PaymentsModule,
      TerminusModule.forRoot(),
    ],
    controllers: [HealthController],
    providers: [
      IdempotencyHealthIndicator,
      {
        provide: PROVIDER_WEBHOOK_SECRETS,
        useValue: config.webhookSecrets ?? [DEFAULT_WEBHOOK_SECRET],
      },
      { provide: APP_INTERCEPTOR, useClass: DatabaseUnavailableInterceptor },
      {
        provide: APP_PIPE,
        useValue: new ValidationPipe({
          whitelist: true,
          forbidNonWhitelisted: true,
          transform: true,
        }),
      },
    ],
  };
}
