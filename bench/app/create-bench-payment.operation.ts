import { IdempotentOperation, defineSteps, proceed, respond } from '../../lib/phases';
import { BenchProvider } from './bench-provider.service';
import type { BenchPayment, BenchPaymentInput } from './bench-payment';
import { INSERT_PENDING_PAYMENT, MARK_PAYMENT_SUCCEEDED } from './bench-payment';

/** State carried between the steps. */
export interface BenchPaymentState {
  paymentId: number;
  chargeId: string;
}

/**
 * `POST /payments-phased`'s operation, shaped like the sample's `POST /payments` (docs/sample-app.md)
 * without its staged receipt job: (1) local `payment_created`: the payment, pending;
 * (2) foreign `charged`: the provider call with `derivedKey('charge')`, outside any transaction;
 * (3) local `succeeded`: the payment succeeded, 201 with the row.
 */
@IdempotentOperation('bench.payments.create')
export class CreateBenchPayment {
  constructor(private readonly provider: BenchProvider) {}

  readonly steps = defineSteps<BenchPaymentInput, BenchPaymentState, BenchPayment>((step) => [
    step.local('payment_created', async ({ manager, input }) => {
      const [pending] = await manager.query(INSERT_PENDING_PAYMENT, [
        input.amount,
        input.note ?? null,
      ]);
      return proceed({ paymentId: pending.id });
    }),
    step.foreign('charged', { timeoutSeconds: 10 }, async ({ input, derivedKey, signal }) => {
      const charge = await this.provider.charge({
        idempotencyKey: derivedKey('charge'),
        amount: input.amount,
        latencyMs: input.providerLatencyMs,
        signal,
      });
      return proceed({ chargeId: charge.chargeId });
    }),
    step.local('succeeded', async ({ manager, state }) => {
      const [[payment]] = await manager.query(MARK_PAYMENT_SUCCEEDED, [
        state.paymentId,
        state.chargeId,
      ]);
      return respond(201, payment);
    }),
  ]);
}
