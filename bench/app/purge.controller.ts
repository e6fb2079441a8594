import { Controller, HttpCode, Post } from '@nestjs/common';
import { IdempotencyPurgeService } from '../../lib';

/** What `POST /admin/purge` answers. */
export interface BenchPurgeResult {
  deleted: number;
  durationMs: number;
}

/**
 * `POST /admin/purge`: runs the library's TTL purge now, in the server, on the server's pool —
 * where the scheduled purge runs in production. Bench only: never expose this in an app.
 */
@Controller('admin')
export class PurgeController {
  constructor(private readonly purge: IdempotencyPurgeService) {}

  /** @returns how many records were deleted and how long it took */
  @Post('purge')
  @HttpCode(200)
  async run(): Promise<BenchPurgeResult> {
    const started = process.hrtime.bigint();
    const deleted = await this.purge.purgeExpired();
    return { deleted, durationMs: Number(process.hrtime.bigint() - started) / 1e6 };
  }
}
