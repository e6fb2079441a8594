import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import type { HealthIndicatorResult } from '@nestjs/terminus';
import { withoutUndefined } from '../config/idempotency.defaults';
import { IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import type { IdempotencyStoreCapabilities } from '../storage/idempotency-store.capabilities';

/** Bounds of `IdempotencyHealthIndicator.isHealthy()`; each has a default. */
export interface IdempotencyHealthOptions {
  /** How long the store may take to answer before the check is down (ms). Default 1000. */
  timeoutMs?: number;
  /** Down when more records than this are in flight past their lease. Default 100. */
  maxStuckInFlight?: number;
  /** Down when more expired records than this wait for the purge. Default 10000. */
  maxPurgeBacklog?: number;
  /**
   * Down when more operations in phases than this are idle (unfinished and not running) or
   * abandoned. Default `Infinity` (reported, never down).
   */
  maxUnfinishedOperations?: number;
}

/** The defaults of `IdempotencyHealthOptions`. */
export const DEFAULT_IDEMPOTENCY_HEALTH_OPTIONS: Readonly<Required<IdempotencyHealthOptions>> =
  Object.freeze({
    timeoutMs: 1000,
    maxStuckInFlight: 100,
    maxPurgeBacklog: 10_000,
    maxUnfinishedOperations: Infinity,
  });

/** The most rows one count reads (counts at or over it are reported as it). */
const COUNT_LIMIT = 100_000;

/**
 * A `@nestjs/terminus` health indicator for the idempotency store: down when the store does
 * not answer within `timeoutMs`, or when more records than allowed are stuck in flight past
 * their lease or wait for the purge. Import it from `nest-idempotency/terminus` and add it to
 * the providers of the module that has `TerminusModule`.
 *
 * @example
 * \@Get('health') \@HealthCheck()
 * check() {
 *   return this.health.check([() => this.idempotency.isHealthy('idempotency')]);
 * }
 */
@Injectable()
export class IdempotencyHealthIndicator {
  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly indicator: HealthIndicatorService,
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES)
    private readonly capabilities: IdempotencyStoreCapabilities,
  ) {}

  /**
   * Checks the store.
   * @param key - the key of the result in the health report
   * @param bounds - thresholds that turn the check down (see `IdempotencyHealthOptions`)
   * @returns `{ [key]: { status: 'up' | 'down', ...counts } }`
   */
  async isHealthy<const Key extends string = 'idempotency'>(
    key: Key = 'idempotency' as Key,
    bounds: IdempotencyHealthOptions = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const session = this.indicator.check(key);
    const limits = { ...DEFAULT_IDEMPOTENCY_HEALTH_OPTIONS, ...withoutUndefined(bounds) };
    const query = this.capabilities.health;
    if (!query) return session.up({ store: 'not checked (the store reports no health counts)' });
    let health;
    try {
      health = await query.read(COUNT_LIMIT, limits.timeoutMs);
    } catch (error) {
      return session.down({ message: `store unavailable: ${(error as Error)?.message ?? error}` });
    }
    const { stuckInFlight, idleOperations, abandonedOperations, purgeBacklog } = health;
    const unfinished = idleOperations + abandonedOperations;
    const problems = [
      [stuckInFlight, limits.maxStuckInFlight, `${stuckInFlight} records stuck in flight`],
      [purgeBacklog, limits.maxPurgeBacklog, `purge backlog of ${purgeBacklog}`],
      [unfinished, limits.maxUnfinishedOperations, `${unfinished} unfinished operations`],
    ] as const;
    const message = problems
      .filter(([count, max]) => count > max)
      .map(([, max, problem]) => `${problem} (max ${max})`)
      .join('; ');
    return message ? session.down({ ...health, message }) : session.up({ ...health });
  }
}
