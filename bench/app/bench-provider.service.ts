import { setTimeout as sleep } from 'node:timers/promises';
import { BadRequestException } from '@nestjs/common';
import type { DataSource } from 'typeorm';

/** What the fake provider answers: the charge made for the key (the first one, on a repeat). */
export interface BenchCharge {
  chargeId: string;
}

/** The longest provider latency a request may ask for, in milliseconds. */
export const MAX_PROVIDER_LATENCY_MS = 60_000;

const INSERT_CHARGE = `
  INSERT INTO bench_provider_charges (idempotency_key, charge_id, amount) VALUES ($1, $2, $3)
  ON CONFLICT (idempotency_key) DO NOTHING`;

/**
 * A fake payment provider for the phased bench routes: it waits its latency (a timer: the
 * provider thinking, no CPU), then makes one small write of its own, idempotent on the key it is
 * given, on a pooled connection of the app's DataSource in autocommit — never inside the
 * caller's transaction. Provided by `createBenchModule()` with a factory (it takes the default
 * latency from the config).
 */
export class BenchProvider {
  constructor(
    private readonly dataSource: DataSource,
    /** `BENCH_PROVIDER_LATENCY_MS`: the latency when a request does not choose one. */
    readonly defaultLatencyMs: number,
  ) {}

  /**
   * Charges once per key.
   * @param request - `idempotencyKey` (a derived key), amount, latency in ms (0: no timer at
   *   all), and the caller's abort signal
   * @returns the charge id, the same for every call with the key
   */
  async charge(request: {
    idempotencyKey: string;
    amount: number;
    latencyMs: number;
    signal?: AbortSignal;
  }): Promise<BenchCharge> {
    if (request.latencyMs > 0)
      await sleep(request.latencyMs, undefined, { signal: request.signal });
    const chargeId = `ch_${request.idempotencyKey.slice(0, 24)}`;
    await this.dataSource.query(INSERT_CHARGE, [request.idempotencyKey, chargeId, request.amount]);
    return { chargeId };
  }

  /**
   * The latency a request asked for with `?providerLatencyMs=`, or the default.
   * @throws BadRequestException when it is not an integer from 0 to 60000
   */
  latencyFor(raw: string | undefined): number {
    if (raw === undefined || raw === '') return this.defaultLatencyMs;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0 || value > MAX_PROVIDER_LATENCY_MS) {
      throw new BadRequestException(
        `providerLatencyMs must be an integer from 0 to ${MAX_PROVIDER_LATENCY_MS}`,
      );
    }
    return value;
  }
}
