import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@nestjs/common';
import { BENCH_READY_LINE, loadBenchAppConfig } from './app/bench-app.config';
import { createBenchApp } from './app/bench-app.factory';

/**
 * Starts the bench app (bench/README.md): `npm run bench:serve`. Configured by environment variables:
 * PORT, HOST, DATABASE_URL, HTTP_ADAPTER, BENCH_POOL_SIZE, REDIS_URL, PEER_KEY_PREFIX,
 * PEER_TTL_MS, IDEMPOTENCY_PURGE_BATCH_SIZE, BENCH_PROVIDER_LATENCY_MS, BENCH_WAIT_HOLD_MS, BENCH_ASYNC_HOOKS, BENCH_IDEMPOTENCY (see `bench/app/bench-app.config.ts`).
 */
async function bootstrap(): Promise<void> {
  const config = loadBenchAppConfig(process.env);
  // Never disabled: from here on, every promise of the process pays Node 20's async hooks.
  if (config.asyncHooks) new AsyncLocalStorage<object>().enterWith({});
  const app = await createBenchApp(config);
  await app.listen(config.port, config.host);
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  // One machine-readable line on stdout for the runner; the rest goes through Nest's logger.
  process.stdout.write(
    `${BENCH_READY_LINE} ${JSON.stringify({ port, pid: process.pid, adapter: config.httpAdapter, peer: config.redisUrl !== undefined })}\n`,
  );
}

bootstrap().catch((error: unknown) => {
  new Logger('BenchApp').error('Failed to start', error as Error);
  process.exitCode = 1;
  // Open pools or Redis clients would keep a half-started app alive.
  setTimeout(() => process.exit(1), 1000).unref();
});
