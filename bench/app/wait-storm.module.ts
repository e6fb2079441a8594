import { BadRequestException, Body, Controller, Module, Post, Query } from '@nestjs/common';
import type { DynamicModule, Type } from '@nestjs/common';
import { Idempotent } from '../../lib';
import type { BenchIdempotencyConfig } from './bench-app.config';
import { BenchEntriesService } from './bench-entries.service';
import type { BenchEntry } from './bench-entry';
import { parseBenchEntryInput } from './bench-entry';
import {
  WAIT_STORM_MAX_SECONDS,
  WAIT_STORM_POLL_SECONDS,
  WAIT_STORM_PREFIXES,
} from './wait-storm.routes';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A controller at `POST /<prefix>`: waits `holdMs` (the first request's run, during which its
 * duplicates arrive and wait), then inserts the row (one per execution; the runner sends the key
 * as its `note` and counts them per key) and answers 201 with it.
 */
function waitStormController(prefix: string, defaultHoldMs: number): Type {
  @Controller(prefix)
  class WaitStormController {
    constructor(private readonly entries: BenchEntriesService) {}

    /** `POST /<prefix>?holdMs=`: the row inserted after `holdMs` (default `BENCH_WAIT_HOLD_MS`). */
    @Post()
    @Idempotent({
      wait: { maxSeconds: WAIT_STORM_MAX_SECONDS, pollIntervalSeconds: WAIT_STORM_POLL_SECONDS },
    })
    async create(
      @Query('holdMs') raw: string | undefined,
      @Body() body: unknown,
    ): Promise<BenchEntry> {
      const holdMs = raw === undefined ? defaultHoldMs : Number(raw);
      if (!Number.isInteger(holdMs) || holdMs < 0 || holdMs > 60_000) {
        throw new BadRequestException('holdMs must be an integer from 0 to 60000');
      }
      const input = parseBenchEntryInput(body);
      await sleep(holdMs);
      return this.entries.insert(input);
    }
  }
  return WaitStormController;
}

/**
 * The wait-storm phase's route on a server whose one idempotency configuration is `default`
 * (`POST /wait-notify`: the TypeORM store as applications get it, waiters on other instances
 * woken by `LISTEN/NOTIFY`) or `poll` (`POST /wait-poll`: `typeOrmStore({ wakeUps: 'poll' })`,
 * they look again every `WAIT_STORM_POLL_SECONDS`). Both keep the replay cache and every other
 * default, and share the record table. None on other servers.
 *
 * @param defaultHoldMs - how long the handler takes without `?holdMs=`
 */
export function waitStormModules(
  config: BenchIdempotencyConfig,
  defaultHoldMs: number,
): DynamicModule[] {
  if (config !== 'default' && config !== 'poll') return [];
  const prefix = WAIT_STORM_PREFIXES[config === 'poll' ? 'poll' : 'notify'];
  @Module({})
  class WaitStormModule {}
  Object.defineProperty(WaitStormModule, 'name', { value: `WaitStorm_${prefix}_Module` });
  return [
    {
      module: WaitStormModule,
      controllers: [waitStormController(prefix, defaultHoldMs)],
      providers: [BenchEntriesService],
    },
  ];
}
