import { DEFAULT_WAIT_HOLD_MS } from './wait-storm.routes';

/** HTTP adapters the bench app runs on. */
export type BenchHttpAdapter = 'express' | 'fastify';

/**
 * The idempotency configurations a bench server runs with (`BENCH_IDEMPOTENCY`), one per server:
 * `default` for every phase but two; `clear` and `sealed` for the encryption phase, `default` and
 * `poll` for the wait storm (`benchIdempotencyOptions()`).
 */
export const BENCH_IDEMPOTENCY_CONFIGS = ['default', 'clear', 'sealed', 'poll'] as const;

/** One of `BENCH_IDEMPOTENCY_CONFIGS`. */
export type BenchIdempotencyConfig = (typeof BENCH_IDEMPOTENCY_CONFIGS)[number];

/** Everything the bench app reads from its environment (bench/README.md). */
export interface BenchAppConfig {
  /** `PORT` (default 3100; 0 picks a free port). */
  port: number;
  /** `HOST` to listen on (default 127.0.0.1). */
  host: string;
  /** `DATABASE_URL`: the PostgreSQL database of the bench app. */
  databaseUrl: string;
  /** `HTTP_ADAPTER`: `express` (default) or `fastify`. */
  httpAdapter: BenchHttpAdapter;
  /** `BENCH_POOL_SIZE`: connections in the TypeORM pool (default 20). */
  poolSize: number;
  /**
   * `REDIS_URL` of the peer library's store (default `redis://127.0.0.1:6379`); `REDIS_URL=off`
   * leaves the peer route out.
   */
  redisUrl: string | undefined;
  /** `PEER_KEY_PREFIX`: prefix of the peer's Redis keys, so runs never see each other's keys. */
  peerKeyPrefix: string;
  /** `PEER_TTL_MS`: how long the peer keeps a key in Redis (default one hour). */
  peerTtlMs: number;
  /** `IDEMPOTENCY_PURGE_BATCH_SIZE`: rows per purge statement (default: the library's). */
  purgeBatchSize: number | undefined;
  /**
   * `BENCH_PROVIDER_LATENCY_MS`: how long the fake provider of the payment routes takes (default
   * 0); a request may choose its own with `?providerLatencyMs=`.
   */
  providerLatencyMs: number;
  /**
   * `BENCH_WAIT_HOLD_MS`: how long the handler of the wait-storm routes takes (default 200); a
   * request may choose its own with `?holdMs=`.
   */
  waitHoldMs: number;
  /**
   * `BENCH_ASYNC_HOOKS=on`: an `AsyncLocalStorage` of the app's own is on from the start, so every
   * request pays Node 20's async hooks (as with OpenTelemetry or nestjs-cls); default off.
   */
  asyncHooks: boolean;
  /**
   * `BENCH_IDEMPOTENCY`: the server's one idempotency configuration (default `default`), and with
   * it which of the encryption and wait-storm routes it serves.
   */
  idempotency: BenchIdempotencyConfig;
}

/** Start of the line `bench:serve` prints once listening, followed by JSON with the port. */
export const BENCH_READY_LINE = 'bench-server ready';

/** Where `npm run bench:serve` goes when `DATABASE_URL` is unset. */
export const DEFAULT_BENCH_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/bench';

function readInteger(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(
      `${name}=${JSON.stringify(raw)} is not valid: use an integer >= ${min}, or unset it for the default (${fallback}).`,
    );
  }
  return value;
}

/**
 * Reads the bench app's configuration from environment variables.
 *
 * @param env - usually `process.env`
 * @returns the configuration with defaults filled in
 * @throws Error naming the variable and the fix when a value is invalid
 */
export function loadBenchAppConfig(env: NodeJS.ProcessEnv = process.env): BenchAppConfig {
  const adapter = (env.HTTP_ADAPTER ?? 'express').trim().toLowerCase() || 'express';
  if (adapter !== 'express' && adapter !== 'fastify') {
    throw new Error(
      `HTTP_ADAPTER=${JSON.stringify(env.HTTP_ADAPTER)} is not valid: use express or fastify.`,
    );
  }
  const idempotency = (env.BENCH_IDEMPOTENCY ?? '').trim() || 'default';
  if (!(BENCH_IDEMPOTENCY_CONFIGS as readonly string[]).includes(idempotency)) {
    throw new Error(
      `BENCH_IDEMPOTENCY=${JSON.stringify(env.BENCH_IDEMPOTENCY)} is not valid: use ${BENCH_IDEMPOTENCY_CONFIGS.join(', ')}.`,
    );
  }
  const redisUrl = env.REDIS_URL?.trim() || 'redis://127.0.0.1:6379';
  const batch = env.IDEMPOTENCY_PURGE_BATCH_SIZE;
  return {
    port: readInteger(env, 'PORT', 3100, 0),
    host: env.HOST?.trim() || '127.0.0.1',
    databaseUrl: env.DATABASE_URL?.trim() || DEFAULT_BENCH_DATABASE_URL,
    httpAdapter: adapter,
    poolSize: readInteger(env, 'BENCH_POOL_SIZE', 20, 1),
    redisUrl: redisUrl === 'off' ? undefined : redisUrl,
    peerKeyPrefix: env.PEER_KEY_PREFIX?.trim() || `nest-idempotency-bench:${process.pid}`,
    peerTtlMs: readInteger(env, 'PEER_TTL_MS', 3_600_000, 1),
    purgeBatchSize:
      batch === undefined || batch.trim() === ''
        ? undefined
        : readInteger(env, 'IDEMPOTENCY_PURGE_BATCH_SIZE', 1000, 1),
    providerLatencyMs: readInteger(env, 'BENCH_PROVIDER_LATENCY_MS', 0, 0),
    waitHoldMs: readInteger(env, 'BENCH_WAIT_HOLD_MS', DEFAULT_WAIT_HOLD_MS, 0),
    asyncHooks: env.BENCH_ASYNC_HOOKS === 'on',
    idempotency: idempotency as BenchIdempotencyConfig,
  };
}
