import { NestFactory } from '@nestjs/core';
import type { INestApplication, LogLevel } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { createAppModule } from './app.module';
import type { SampleAppConfig } from './config/sample-app.config';
import { setupApiDocs } from './docs/api-docs';
import { startEmbeddedPostgres } from './database/embedded-postgres';
import type { EmbeddedPostgres } from './database/embedded-postgres';
import { APP_POOL_SIZE } from './database/pool-sizes';

/** A sample app, initialised (routes registered) but not listening yet. */
export interface SampleApp {
  app: INestApplication;
  /** `true` when it runs on the embedded PGlite database. */
  embedded: boolean;
  /** Closes the app, then the embedded database if any. */
  close(): Promise<void>;
}

/**
 * Creates and initialises the sample app on the configured adapter. Without a `databaseUrl`
 * it starts one embedded PGlite database. PGlite runs one transaction at a time for all
 * connections; that is enough because `POST /payments` runs in phases, with no transaction open
 * while the provider is called (it used to need a second PGlite for the provider).
 *
 * @param config - see `loadSampleAppConfig()`
 * @param options - `logger: false` to silence Nest (tests)
 */
export async function createSampleApp(
  config: SampleAppConfig,
  options: { logger?: false | LogLevel[] } = {},
): Promise<SampleApp> {
  let embedded: EmbeddedPostgres | undefined;
  const stopEmbedded = async () => embedded?.stop();
  try {
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      // maxConnections ≥ pool size, or the socket server refuses the pool's extra connections.
      embedded = await startEmbeddedPostgres(APP_POOL_SIZE + 2);
      databaseUrl = embedded.url;
    }
    const module = createAppModule({
      databaseUrl,
      embedded: embedded !== undefined,
      ttlSeconds: config.ttlSeconds,
      lockTimeoutSeconds: config.lockTimeoutSeconds,
      purgeIntervalSeconds: config.purgeIntervalSeconds,
      providerLatencyMs: config.providerLatencyMs,
      completerIntervalSeconds: config.completerIntervalSeconds,
      completerAfterSeconds: config.completerAfterSeconds,
      jobsIntervalSeconds: config.jobsIntervalSeconds,
      preparedStatements: config.preparedStatements,
      webhookSecrets: config.webhookSecrets,
      crash: config.crash,
    });
    // rawBody: the provider webhook's signature is checked over the bytes it signed.
    const nestOptions = { abortOnError: false, logger: options.logger, rawBody: true };
    const app =
      config.httpAdapter === 'fastify'
        ? await NestFactory.create(module, new FastifyAdapter(), nestOptions)
        : await NestFactory.create(module, nestOptions);
    setupApiDocs(app, config.httpAdapter); // Swagger UI at /docs, the document at /docs-json
    await app.init();
    if (config.httpAdapter === 'fastify') await app.getHttpAdapter().getInstance().ready();
    return {
      app,
      embedded: embedded !== undefined,
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
