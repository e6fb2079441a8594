/** HTTP adapters the sample app can run on. */
export type SampleHttpAdapter = 'express' | 'fastify';

/** Everything the sample app reads from its environment (SPEC §10). */
export interface SampleAppConfig {
  /** Listen port (`PORT`, default 3000; 0 picks a free one). */
  port: number;
  /** PostgreSQL connection string (`DATABASE_URL`); unset → embedded PGlite. */
  databaseUrl: string | undefined;
  /** `HTTP_ADAPTER`: `express` (default) or `fastify`. */
  httpAdapter: SampleHttpAdapter;
  /** `IDEMPOTENCY_TTL_SECONDS` (default 86400). */
  ttlSeconds: number;
  /** `IDEMPOTENCY_LOCK_TIMEOUT_SECONDS` (default 60). */
  lockTimeoutSeconds: number;
  /** `IDEMPOTENCY_PURGE_INTERVAL_SECONDS` (default 60). */
  purgeIntervalSeconds: number;
  /** `PROVIDER_LATENCY_MS`: delay of each call to the fake provider (default 0). */
  providerLatencyMs: number;
}

function readNumber(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  options: { min: number; integer?: boolean },
): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (
    !Number.isFinite(value) ||
    value < options.min ||
    (options.integer && !Number.isInteger(value))
  ) {
    throw new Error(
      `${name}=${JSON.stringify(raw)} is not valid: use a${options.integer ? 'n integer' : ' number'} ` +
        `>= ${options.min}, or unset it for the default (${fallback}).`,
    );
  }
  return value;
}

/**
 * Reads the sample app's configuration from environment variables.
 *
 * @param env - usually `process.env`
 * @returns the configuration with defaults filled in
 * @throws Error naming the variable and the fix when a value is invalid
 */
export function loadSampleAppConfig(env: NodeJS.ProcessEnv = process.env): SampleAppConfig {
  const adapter = (env.HTTP_ADAPTER ?? 'express').trim().toLowerCase() || 'express';
  if (adapter !== 'express' && adapter !== 'fastify') {
    throw new Error(
      `HTTP_ADAPTER=${JSON.stringify(env.HTTP_ADAPTER)} is not valid: use express or fastify.`,
    );
  }
  return {
    port: readNumber(env, 'PORT', 3000, { min: 0, integer: true }),
    databaseUrl: env.DATABASE_URL?.trim() || undefined,
    httpAdapter: adapter,
    ttlSeconds: readNumber(env, 'IDEMPOTENCY_TTL_SECONDS', 86400, { min: 1 }),
    lockTimeoutSeconds: readNumber(env, 'IDEMPOTENCY_LOCK_TIMEOUT_SECONDS', 60, { min: 1 }),
    purgeIntervalSeconds: readNumber(env, 'IDEMPOTENCY_PURGE_INTERVAL_SECONDS', 60, { min: 1 }),
    providerLatencyMs: readNumber(env, 'PROVIDER_LATENCY_MS', 0, { min: 0, integer: true }),
  };
}
