import { Body, Controller, Post, Query } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { IdempotencyOperations } from '../../lib/phases';
import { parseBenchEntryInput } from './bench-entry';
import type { BenchPayment, BenchPaymentInput } from './bench-payment';
import { BenchPaymentsService } from './bench-payments.service';
import { BenchProvider } from './bench-provider.service';
import { CreateBenchPayment } from './create-bench-payment.operation';

/**
 * The same payment (entry pending → provider charge → entry succeeded) written two ways: in the
 * request's transaction, held across the provider call, and as an operation in phases.
 * `?providerLatencyMs=` sets the provider's latency for the request (default
 * `BENCH_PROVIDER_LATENCY_MS`).
 */
@Controller()
export class BenchPaymentsController {
  constructor(
    private readonly payments: BenchPaymentsService,
    private readonly operations: IdempotencyOperations,
    private readonly provider: BenchProvider,
  ) {}

  /** `POST /payments-tx`: one transaction, open while the provider thinks. */
  @Post('payments-tx')
  @Idempotent({ execution: { transactional: true } })
  transactional(
    @Body() body: unknown,
    @Query('providerLatencyMs') latency?: string,
  ): Promise<BenchPayment> {
    return this.payments.createInTransaction(this.input(body, latency));
  }

  /** `POST /payments-phased`: three steps, no transaction open during the provider call. */
  @Post('payments-phased')
  @Idempotent()
  phased(
    @Body() body: unknown,
    @Query('providerLatencyMs') latency?: string,
  ): Promise<BenchPayment> {
    return this.operations.run(CreateBenchPayment, this.input(body, latency));
  }

  private input(body: unknown, latency: string | undefined): BenchPaymentInput {
    return { ...parseBenchEntryInput(body), providerLatencyMs: this.provider.latencyFor(latency) };
  }
}
