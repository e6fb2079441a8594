import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { NodeIdempotencyModule, StorageAdapterEnum } from '@node-idempotency/nestjs';
import { CreateIdempotencyRecords1732233600000, IdempotencyModule } from '../../lib';
import type { BenchAppConfig } from './bench-app.config';
import { BenchController } from './bench.controller';
import { BenchEntriesService } from './bench-entries.service';
import { CreateBenchEntries1764547200000 } from './create-bench-entries.migration';
import { HealthController } from './health.controller';
import { PeerController } from './peer.controller';
import { PurgeController } from './purge.controller';

/** The root module of the bench app. Build it with `createBenchModule()`. */
@Module({})
export class BenchModule {}

/**
 * Builds the bench app's root module: TypeORM on `DATABASE_URL` (schema created by migrations
 * on start), the idempotency module with its scheduled purge off (the runner triggers it), and,
 * unless `REDIS_URL=off`, the peer library on Redis.
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
        migrations: [CreateIdempotencyRecords1732233600000, CreateBenchEntries1764547200000],
        migrationsRun: true,
        synchronize: false,
        logging: false,
        extra: { max: config.poolSize },
        retryAttempts: 3,
        retryDelay: 1000,
      }),
      IdempotencyModule.forRoot({
        purge: {
          enabled: false,
          ...(config.purgeBatchSize ? { batchSize: config.purgeBatchSize } : {}),
        },
      }),
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
      HealthController,
      PurgeController,
      ...(peer ? [PeerController] : []),
    ],
    providers: [BenchEntriesService],
  };
}
