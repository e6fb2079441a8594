import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { NodeIdempotencyModule, StorageAdapterEnum } from '@node-idempotency/nestjs';
import { DataSource } from 'typeorm';
import {
  AddPhasesToIdempotencyRecords1764028800000,
  AddPurgeAfterToIdempotencyRecords1764201600000,
  CreateIdempotencyRecords1732233600000,
} from '../../lib/storage/typeorm';
import { IdempotencyModule } from '../../lib';
import { IdempotencyPhasesModule } from '../../lib/phases';
import { DurableKeyEntity } from '../peers/durable-key.entity';
import { DurableIdempotencyInterceptor } from '../peers/durable-idempotency.interceptor';
import { DurablePeerController } from '../peers/durable-peer.controller';
import { AddBenchFloor1764806400000 } from './add-bench-floor.migration';
import { AddBenchPayments1764720000000 } from './add-bench-payments.migration';
import type { BenchAppConfig } from './bench-app.config';
import { benchIdempotencyOptions } from './bench-idempotency.options';
import { BenchController } from './bench.controller';
import { BenchEntriesService } from './bench-entries.service';
import { BenchPaymentsController } from './bench-payments.controller';
import { BenchPaymentsService } from './bench-payments.service';
import { BenchProvider } from './bench-provider.service';
import { CreateBenchEntries1764547200000 } from './create-bench-entries.migration';
import { CreateBenchPayment } from './create-bench-payment.operation';
import { FloorController } from './floor.controller';
import { ContractFloorController } from './contract-floor.controller';
import { FloorInterceptorController } from './floor-interceptor.controller';
import { HealthController } from './health.controller';
import { PeerController } from './peer.controller';
import { PurgeController } from './purge.controller';
import { sizedBodyModules } from './sized-body.module';
import { WaitFloorController } from './wait-floor.controller';
import { waitStormModules } from './wait-storm.module';

/** The root module of the bench app. Build it with `createBenchModule()`. */
@Module({})
export class BenchModule {}

/**
 * Builds the bench app's root module: TypeORM on `DATABASE_URL` (schema created by migrations
 * on start), the idempotency module in the server's one configuration (`BENCH_IDEMPOTENCY`,
 * scheduled purge off: the runner triggers it), the phases module with its completer off (the
 * runner empties the tables between cases: there is nothing to finish),
 * the payment routes with their fake provider, and, unless `REDIS_URL=off`, the peer library on
 * Redis.
 *
 * @param config - see `loadBenchAppConfig()`
 * @returns the module to give to `NestFactory.create()`
 */
export function createBenchModule(config: BenchAppConfig): DynamicModule {
  const peer = config.redisUrl !== undefined;
  return {
    module: BenchModule,
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: config.databaseUrl,
        // The phases upgrade is for bench databases made before phases (harmless on new ones).
        migrations: [
          CreateIdempotencyRecords1732233600000,
          AddPhasesToIdempotencyRecords1764028800000,
          AddPurgeAfterToIdempotencyRecords1764201600000,
          CreateBenchEntries1764547200000,
          AddBenchPayments1764720000000,
          AddBenchFloor1764806400000,
        ],
        entities: [DurableKeyEntity],
        migrationsRun: true,
        synchronize: false,
        logging: false,
        extra: { max: config.poolSize },
        retryAttempts: 3,
        retryDelay: 1000,
      }),
      TypeOrmModule.forFeature([DurableKeyEntity]),
      // The server's one idempotency configuration (BENCH_IDEMPOTENCY).
      IdempotencyModule.forRoot(benchIdempotencyOptions(config)),
      IdempotencyPhasesModule.forRoot({ completer: false }),
      // The encryption phase's route (on a clear or sealed server) and the wait storm's (on a
      // default or poll server): each named after the configuration it runs on.
      ...sizedBodyModules(config.idempotency),
      ...waitStormModules(config.idempotency, config.waitHoldMs),
      ...(peer
        ? [
            NodeIdempotencyModule.forRootAsync({
              storage: { adapter: StorageAdapterEnum.redis, options: { url: config.redisUrl } },
              cacheKeyPrefix: config.peerKeyPrefix,
              cacheTTLMS: config.peerTtlMs,
            }),
          ]
        : []),
    ],
    controllers: [
      BenchController,
      FloorController,
      FloorInterceptorController,
      ContractFloorController,
      DurablePeerController,
      HealthController,
      PurgeController,
      WaitFloorController,
      ...(peer ? [PeerController] : []),
      // Last, so the routes the other phases measure keep their place in Express's router.
      BenchPaymentsController,
    ],
    providers: [
      BenchEntriesService,
      DurableIdempotencyInterceptor,
      BenchPaymentsService,
      CreateBenchPayment,
      {
        provide: BenchProvider,
        useFactory: (dataSource: DataSource) =>
          new BenchProvider(dataSource, config.providerLatencyMs),
        inject: [DataSource],
      },
    ],
  };
}
