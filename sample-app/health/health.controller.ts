import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import type { HealthCheckResult } from '@nestjs/terminus';
import { IdempotencyHealthIndicator } from '../../lib/health';

/**
 * `GET /health` — 200 once the app is up and the idempotency store answers within a second
 * with no more than 100 records stuck in flight and 10000 waiting for the purge; 503 otherwise.
 * The database is the store's, so this is the database check too.
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly idempotency: IdempotencyHealthIndicator,
  ) {}

  /** @returns terminus's report: `{ status: 'ok', info: { idempotency: { status: 'up', ... } } }` */
  @Get()
  @HealthCheck()
  check(): Promise<HealthCheckResult> {
    return this.health.check([() => this.idempotency.isHealthy('idempotency')]);
  }
}
