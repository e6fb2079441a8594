/**
 * The wait-storm phase's routes: `POST /<prefix>`, with `@Idempotent({ wait: { maxSeconds:
 * WAIT_STORM_MAX_SECONDS, pollIntervalSeconds: WAIT_STORM_POLL_SECONDS } })`, each on the servers
 * of its idempotency configuration. `notify` is on `default` servers, the TypeORM store as
 * applications get it (wake-ups over `LISTEN/NOTIFY`), `poll` on `poll` servers,
 * `typeOrmStore({ wakeUps: 'poll' })`; `floor` is the wake-up floor, no library
 * (`WaitFloorController`, on every server).
 */
export const WAIT_STORM_PREFIXES = {
  notify: 'wait-notify',
  poll: 'wait-poll',
  floor: 'wait-floor',
} as const;

/** How the waiters of a wait-storm route learn that the key settled on another instance. */
export type WaitStormWakeUps = keyof typeof WAIT_STORM_PREFIXES;

/** The routes' `wait.maxSeconds`: what `Prefer: wait=N` is capped at. */
export const WAIT_STORM_MAX_SECONDS = 10;

/** The routes' `wait.pollIntervalSeconds` (the library's default). */
export const WAIT_STORM_POLL_SECONDS = 0.5;

/** How long the handler takes when neither `?holdMs=` nor `BENCH_WAIT_HOLD_MS` says. */
export const DEFAULT_WAIT_HOLD_MS = 200;
