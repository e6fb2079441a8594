import { Module, ValidationPipe } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { APP_INTERCEPTOR, APP_PIPE } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CreateIdempotencyRecords1732233600000, IdempotencyModule } from '../lib';
import { readAccountId } from './accounts/account-id';
import { CreatePayments1763769600000 } from './database/create-payments.migration';
import { DatabaseUnavailableInterceptor } from './database/database-unavailable.interceptor';
import { APP_POOL_SIZE, PROVIDER_POOL_SIZE } from './database/pool-sizes';
import { HealthController } from './health/health.controller';
import { PaymentEntity } from './payments/payment.entity';
import { PaymentsModule } from './payments/payments.module';
import { CreateProviderTables1763769600001 } from './provider/create-provider-tables.migration';
import { ProviderChargeEntity } from './provider/provider-charge.entity';
import { PROVIDER_DATA_SOURCE } from './provider/provider.constants';
import { ProviderModule } from './provider/provider.module';
import { RefundEntity } from './refunds/refund.entity';

/** What the sample app module needs to know; the databases are already reachable. */
export interface SampleAppModuleConfig {
  /** PostgreSQL URL of the app (payments, refunds, idempotency records). */
  databaseUrl: string;
  /** PostgreSQL URL of the fake provider; the same as `databaseUrl` on a real server. */
  providerDatabaseUrl: string;
  ttlSeconds: number;
  lockTimeoutSeconds: number;
  purgeIntervalSeconds: number;
  providerLatencyMs: number;
}

/** The root module of the sample app. Build it with `createAppModule()`. */
@Module({})
export class AppModule {}

/**
 * Builds the sample app's root module. The schema is created on start by migrations (never
 * `synchronize`): the library's record table and the app's tables on the app DataSource, the
 * provider's tables on its own DataSource (with its own migrations table).
 *
 * @param config - database URLs, idempotency settings and provider latency
 * @returns the module to give to `NestFactory.create()` or `Test.createTestingModule()`
 */
export function createAppModule(config: SampleAppModuleConfig): DynamicModule {
  return {
    module: AppModule,
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: config.databaseUrl,
        entities: [PaymentEntity, RefundEntity],
        migrations: [CreateIdempotencyRecords1732233600000, CreatePayments1763769600000],
        migrationsRun: true,
        synchronize: false,
        logging: false,
        extra: { max: APP_POOL_SIZE },
      }),
      TypeOrmModule.forRoot({
        name: PROVIDER_DATA_SOURCE,
        type: 'postgres',
        url: config.providerDatabaseUrl,
        entities: [ProviderChargeEntity],
        migrations: [CreateProviderTables1763769600001],
        migrationsTableName: 'provider_migrations',
        migrationsRun: true,
        synchronize: false,
        logging: false,
        extra: { max: PROVIDER_POOL_SIZE },
      }),
      IdempotencyModule.forRoot({
        scope: (request) => readAccountId(request) ?? '',
        ttlSeconds: config.ttlSeconds,
        lockTimeoutSeconds: config.lockTimeoutSeconds,
        purge: { intervalSeconds: config.purgeIntervalSeconds },
      }),
      ProviderModule.register(config.providerLatencyMs),
      PaymentsModule,
    ],
    controllers: [HealthController],
    providers: [
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
