import { NestFactory } from '@nestjs/core';
import type { INestApplication, LogLevel } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { createAppModule } from './app.module';
import type { SampleAppConfig } from './config/sample-app.config';
import { startEmbeddedPostgres } from './database/embedded-postgres';
import type { EmbeddedPostgres } from './database/embedded-postgres';
import { APP_POOL_SIZE, PROVIDER_POOL_SIZE } from './database/pool-sizes';

/** A sample app, initialised (routes registered) but not listening yet. */
export interface SampleApp {
  app: INestApplication;
  /** `true` when it runs on the embedded PGlite databases. */
  embedded: boolean;
  /** Closes the app, then the embedded databases if any. */
  close(): Promise<void>;
}

/**
 * Creates and initialises the sample app on the configured adapter. Without a `databaseUrl`
 * it starts two embedded PGlite databases: one for the app and one for the fake provider. On
 * a real server both use the same database (through separate pools). The provider needs its
 * own PGlite because PGlite runs one transaction at a time for all connections: the provider
 * is called while the payment's transaction is open, and would wait for it forever.
 *
 * @param config - see `loadSampleAppConfig()`
 * @param options - `logger: false` to silence Nest (tests)
 */
export async function createSampleApp(
  config: SampleAppConfig,
  options: { logger?: false | LogLevel[] } = {},
): Promise<SampleApp> {
  const embedded: EmbeddedPostgres[] = [];
  const stopEmbedded = () => Promise.all(embedded.map((db) => db.stop())).then(() => undefined);
  try {
    let databaseUrl = config.databaseUrl;
    let providerDatabaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      // maxConnections ≥ pool size, or the socket server refuses the pool's extra connections.
      const started = await Promise.allSettled([
        startEmbeddedPostgres(APP_POOL_SIZE + 2),
        startEmbeddedPostgres(PROVIDER_POOL_SIZE + 2),
      ]);
      for (const result of started) if (result.status === 'fulfilled') embedded.push(result.value);
      const failed = started.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
      databaseUrl = embedded[0].url;
      providerDatabaseUrl = embedded[1].url;
    }
    const module = createAppModule({
      databaseUrl,
      providerDatabaseUrl: providerDatabaseUrl!,
      ttlSeconds: config.ttlSeconds,
      lockTimeoutSeconds: config.lockTimeoutSeconds,
      purgeIntervalSeconds: config.purgeIntervalSeconds,
      providerLatencyMs: config.providerLatencyMs,
    });
    const nestOptions = { abortOnError: false, logger: options.logger };
    const app =
      config.httpAdapter === 'fastify'
        ? await NestFactory.create(module, new FastifyAdapter(), nestOptions)
        : await NestFactory.create(module, nestOptions);
    await app.init();
    if (config.httpAdapter === 'fastify') await app.getHttpAdapter().getInstance().ready();
    return {
      app,
      embedded: embedded.length > 0,
      close: async () => {
        await app.close();
        await stopEmbedded();
      },
    };
  } catch (error) {
    await stopEmbedded();
    throw error;
  }
}
