import { Logger } from '@nestjs/common';
import { loadSampleAppConfig } from './config/sample-app.config';
import { createSampleApp } from './sample-app.factory';

/**
 * Starts the sample payments app: `npm run sample`. Configured by environment variables
 * (docs/sample-app.md): PORT, DATABASE_URL (unset → embedded PGlite), HTTP_ADAPTER,
 * IDEMPOTENCY_TTL_SECONDS, IDEMPOTENCY_LOCK_TIMEOUT_SECONDS, IDEMPOTENCY_PURGE_INTERVAL_SECONDS,
 * PROVIDER_LATENCY_MS, IDEMPOTENCY_COMPLETER_INTERVAL_SECONDS, IDEMPOTENCY_COMPLETER_AFTER_SECONDS,
 * IDEMPOTENCY_JOBS_INTERVAL_SECONDS, WEBHOOK_SECRET; tests only: SAMPLE_CRASH_AT,
 * SAMPLE_CRASH_KEY_PREFIX.
 */
async function bootstrap(): Promise<void> {
  const logger = new Logger('SampleApp');
  const config = loadSampleAppConfig(process.env);
  const sample = await createSampleApp(config);
  await sample.app.listen(config.port, '0.0.0.0');
  const address = sample.app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.log(
    `Listening on http://localhost:${port} (${config.httpAdapter}, ` +
      `${sample.embedded ? 'embedded PostgreSQL (PGlite)' : 'DATABASE_URL'})`,
  );

  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    logger.log(`${signal}: shutting down`);
    sample.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('Shutdown failed', error as Error);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

bootstrap().catch((error: unknown) => {
  new Logger('SampleApp').error('Failed to start', error as Error);
  process.exit(1);
});
