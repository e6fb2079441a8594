import { randomBytes } from 'node:crypto';
import type { IdempotencyModuleOptions } from '../../lib';
import { typeOrmStore } from '../../lib/storage/typeorm';
import type { BenchAppConfig } from './bench-app.config';

/**
 * The one `IdempotencyModule.forRoot()` options of a bench server, by its `BENCH_IDEMPOTENCY`
 * (an application has one idempotency configuration, so what a phase compares runs on servers of
 * their own). Every configuration has the scheduled purge off (the runner triggers it);
 * `clear` and `sealed` (the encryption phase) also the replay cache, so a replay reads and, sealed,
 * opens the record every time, as one served by another instance does; `sealed` adds encryption
 * with one key (random per process: its records live only as long as the run); `poll` (the wait
 * storm) is on `typeOrmStore({ wakeUps: 'poll' })`.
 *
 * @param config - see `loadBenchAppConfig()`
 */
export function benchIdempotencyOptions(config: BenchAppConfig): IdempotencyModuleOptions {
  const base: IdempotencyModuleOptions = {
    purge: {
      enabled: false,
      ...(config.purgeBatchSize ? { batchSize: config.purgeBatchSize } : {}),
    },
  };
  switch (config.idempotency) {
    case 'default':
      return base;
    case 'clear':
      return { ...base, replayCache: false };
    case 'sealed':
      return {
        ...base,
        replayCache: false,
        encryption: { keys: [{ id: 'bench', secret: randomBytes(32) }] },
      };
    case 'poll':
      return { ...base, store: typeOrmStore({ wakeUps: 'poll' }) };
  }
}
