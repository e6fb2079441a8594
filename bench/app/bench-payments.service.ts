import { Injectable } from '@nestjs/common';
import { IdempotencyContext } from '../../lib';
import { BenchProvider } from './bench-provider.service';
import type { BenchPayment, BenchPaymentInput } from './bench-payment';
import { INSERT_PENDING_PAYMENT, MARK_PAYMENT_SUCCEEDED } from './bench-payment';

/** `POST /payments-tx`'s handler body: the payment the way it is written without phases. */
@Injectable()
export class BenchPaymentsService {
  constructor(
    private readonly idempotency: IdempotencyContext,
    private readonly provider: BenchProvider,
  ) {}

  /**
   * Inside an `@Idempotent({ execution: { transactional: true } })` handler: inserts the payment as pending
   * through the request's transaction, charges with `derivedKey('charge')` while that
   * transaction stays open (its connection idle in transaction for the provider's latency), then
   * marks it succeeded; the row commits with the stored response.
   * @returns the succeeded payment
   */
  async createInTransaction(input: BenchPaymentInput): Promise<BenchPayment> {
    const manager = this.idempotency.entityManager;
    const [pending] = await manager.query(INSERT_PENDING_PAYMENT, [
      input.amount,
      input.note ?? null,
    ]);
    const charge = await this.provider.charge({
      idempotencyKey: this.idempotency.derivedKey('charge'),
      amount: input.amount,
      latencyMs: input.providerLatencyMs,
    });
    const [[payment]] = await manager.query(MARK_PAYMENT_SUCCEEDED, [pending.id, charge.chargeId]);
    return payment;
  }
}
