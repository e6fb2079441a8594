/** Where `SAMPLE_CRASH_AT` makes the process kill itself (tests only; docs/sample-app.md). */
export const SAMPLE_CRASH_POINTS = [
  'after_payment_created',
  'after_charge_before_record',
  'after_charged',
  'after_job_taken',
] as const;
export type SampleCrashPoint = (typeof SAMPLE_CRASH_POINTS)[number];

/** HTTP adapters the sample app can run on. */
export type SampleHttpAdapter = 'express' | 'fastify';

/** Everything the sample app reads from its environment (docs/sample-app.md). */
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
  /** `IDEMPOTENCY_COMPLETER_INTERVAL_SECONDS`; unset → the library's default. */
  completerIntervalSeconds?: number;
  /** `IDEMPOTENCY_COMPLETER_AFTER_SECONDS`; unset → the library's default. */
  completerAfterSeconds?: number;
  /** `IDEMPOTENCY_JOBS_INTERVAL_SECONDS`; unset → the library's default. */
  jobsIntervalSeconds?: number;
  /**
   * `IDEMPOTENCY_PREPARED_STATEMENTS`: `false` behind PgBouncer in transaction pooling mode
   * before 1.21 (the library's `preparedStatements`); default `true`.
   */
  preparedStatements: boolean;
  /**
   * `WEBHOOK_SECRET`: the secret the provider signs its webhooks with; several, comma-separated,
   * while rotating (default `whsec_sample`).
   */
  webhookSecrets: string[];
  /**
   * `SAMPLE_CRASH_AT` and `SAMPLE_CRASH_KEY_PREFIX` (tests only): the process SIGKILLs itself at
   * that point, for requests whose idempotency key starts with the prefix.
   */
  crash?: { at: SampleCrashPoint; keyPrefix: string };
}

function readOptionalNumber(env: NodeJS.ProcessEnv, name: string, min: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  return readNumber(env, name, min, { min });
}

function readCrash(env: NodeJS.ProcessEnv): SampleAppConfig['crash'] {
  const at = env.SAMPLE_CRASH_AT?.trim();
  const keyPrefix = env.SAMPLE_CRASH_KEY_PREFIX ?? '';
  if (!at) return undefined;
  if (!(SAMPLE_CRASH_POINTS as readonly string[]).includes(at)) {
    throw new Error(
      `SAMPLE_CRASH_AT=${JSON.stringify(at)} is not valid: use ${SAMPLE_CRASH_POINTS.join(', ')}, ` +
        'or unset it.',
    );
  }
  if (keyPrefix === '') {
    throw new Error(
      'SAMPLE_CRASH_AT needs SAMPLE_CRASH_KEY_PREFIX: the process only crashes for requests ' +
        'whose idempotency key starts with it.',
    );
  }
  return { at: at as SampleCrashPoint, keyPrefix };
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

/** The sample's webhook secret when `WEBHOOK_SECRET` is unset. */
export const DEFAULT_WEBHOOK_SECRET = 'whsec_sample';

function readSecrets(env: NodeJS.ProcessEnv, name: string, fallback: string): string[] {
  const secrets = (env[name] ?? '')
    .split(',')
    .map((secret) => secret.trim())
    .filter((secret) => secret !== '');
  return secrets.length > 0 ? secrets : [fallback];
}

function readBoolean(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new Error(`${name}=${JSON.stringify(raw)} is not valid: use true or false.`);
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
    completerIntervalSeconds: readOptionalNumber(
      env,
      'IDEMPOTENCY_COMPLETER_INTERVAL_SECONDS',
      0.1,
    ),
    completerAfterSeconds: readOptionalNumber(env, 'IDEMPOTENCY_COMPLETER_AFTER_SECONDS', 0),
    jobsIntervalSeconds: readOptionalNumber(env, 'IDEMPOTENCY_JOBS_INTERVAL_SECONDS', 0.1),
    preparedStatements: readBoolean(env, 'IDEMPOTENCY_PREPARED_STATEMENTS', true),
    webhookSecrets: readSecrets(env, 'WEBHOOK_SECRET', DEFAULT_WEBHOOK_SECRET),
    crash: readCrash(env),
  };
}
