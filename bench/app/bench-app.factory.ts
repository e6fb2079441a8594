import { NestFactory } from '@nestjs/core';
import type { INestApplication, LogLevel } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { BenchAppConfig } from './bench-app.config';
import { createBenchModule } from './bench.module';

/**
 * Creates and initialises the bench app on the configured adapter (routes registered,
 * migrations run), not listening yet.
 *
 * @param config - see `loadBenchAppConfig()`
 * @param logger - Nest log levels (default: errors, warnings and lifecycle logs)
 */
export async function createBenchApp(
  config: BenchAppConfig,
  logger: LogLevel[] = ['error', 'warn', 'log'],
): Promise<INestApplication> {
  const module = createBenchModule(config);
  const options = { abortOnError: false, logger };
  const app =
    config.httpAdapter === 'fastify'
      ? await NestFactory.create(module, new FastifyAdapter(), options)
      : await NestFactory.create(module, options);
  app.enableShutdownHooks();
  await app.init();
  if (config.httpAdapter === 'fastify') await app.getHttpAdapter().getInstance().ready();
  return app;
}
