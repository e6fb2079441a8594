import { Controller, Get, Query } from '@nestjs/common';
import { promiseCount } from './promise-count';

/** What `GET /health` answers: the process's memory, for the leak check. */
export interface BenchHealth {
  status: 'ok';
  pid: number;
  uptimeSeconds: number;
  /** Whether a full GC ran first (`?gc=1` on a process started with `--expose-gc`). */
  collected: boolean;
  memory: NodeJS.MemoryUsage;
  /**
   * Whether Node's async hooks are on now (a promise made here carries an async id): on Node 20
   * an `AsyncLocalStorage` left on makes every request of the process pay them, so between
   * cases, with nothing in flight, this should be `false`.
   */
  asyncHooks: boolean;
  /** Promises created while counting was on (`?promises=on`, `read` or `off`), else absent. */
  promises?: number;
}

/**
 * `GET /health`: liveness plus `process.memoryUsage()`; `?gc=1` collects garbage first;
 * `?promises=on|off` switches the promise count on or off, `?promises=read` reads it.
 */
@Controller('health')
export class HealthController {
  /** @returns status, pid and memory usage in bytes */
  @Get()
  check(@Query('gc') gc?: string, @Query('promises') promises?: string): BenchHealth {
    if (promises === 'on' || promises === 'off') promiseCount.set(promises === 'on');
    const collect = (globalThis as { gc?: () => void }).gc;
    const collected = gc === '1' && typeof collect === 'function';
    if (collected) collect!();
    return {
      status: 'ok',
      pid: process.pid,
      uptimeSeconds: Math.round(process.uptime()),
      collected,
      memory: process.memoryUsage(),
      asyncHooks: Object.getOwnPropertySymbols(Promise.resolve()).length > 0,
      ...(promises ? { promises: promiseCount.value } : {}),
    };
  }
}
