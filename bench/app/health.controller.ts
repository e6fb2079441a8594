import { Controller, Get, Query } from '@nestjs/common';
import { allocationSampling } from './allocation-sampling';
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
  /** Bytes allocated on V8's heap since `?allocations=on`, answered by `?allocations=off`. */
  allocatedBytes?: number;
}

/**
 * `GET /health`: liveness plus `process.memoryUsage()`; `?gc=1` collects garbage first;
 * `?promises=on|off` switches the promise count on or off, `?promises=read` reads it;
 * `?allocations=on` starts sampling what the heap allocates, `?allocations=off` stops and answers
 * it.
 */
@Controller('health')
export class HealthController {
  /** @returns status, pid and memory usage in bytes */
  @Get()
  async check(
    @Query('gc') gc?: string,
    @Query('promises') promises?: string,
    @Query('allocations') allocations?: string,
  ): Promise<BenchHealth> {
    if (promises === 'on' || promises === 'off') promiseCount.set(promises === 'on');
    if (allocations === 'on') await allocationSampling.start();
    const allocatedBytes = allocations === 'off' ? await allocationSampling.stop() : undefined;
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
      ...(allocatedBytes !== undefined ? { allocatedBytes } : {}),
    };
  }
}
