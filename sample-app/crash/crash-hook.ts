import { Inject, Injectable, Logger } from '@nestjs/common';
import type { SampleAppConfig, SampleCrashPoint } from '../config/sample-app.config';

/** Injection token of the crash settings (`SAMPLE_CRASH_AT`, `SAMPLE_CRASH_KEY_PREFIX`). */
export const SAMPLE_CRASH = Symbol('sample-app:crash');

/**
 * Tests only: kills this process with SIGKILL at a chosen point of `POST /payments`, for requests
 * whose idempotency key starts with the configured prefix — the way a machine dies, with no
 * shutdown hook and nothing flushed. A test crashes one chosen request, then restarts the
 * instance without `SAMPLE_CRASH_AT`.
 */
@Injectable()
export class CrashHook {
  constructor(@Inject(SAMPLE_CRASH) private readonly crash: SampleAppConfig['crash']) {}

  /**
   * Dies here when configured to, for this key.
   * @param point - where the caller is
   * @param idempotencyKey - the key of the payment request concerned
   */
  at(point: SampleCrashPoint, idempotencyKey: string): void {
    if (this.crash?.at !== point || !idempotencyKey.startsWith(this.crash.keyPrefix)) return;
    new Logger('CrashHook').warn(`SAMPLE_CRASH_AT=${point}: killing this process (SIGKILL)`);
    process.kill(process.pid, 'SIGKILL');
  }
}
