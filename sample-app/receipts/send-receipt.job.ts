import { randomBytes } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { IdempotentJobHandler } from '../../lib/phases';
import type { IdempotencyJobHandlerInstance, StagedJob } from '../../lib/phases';
import { CrashHook } from '../crash/crash-hook';
import { PaymentEntity } from '../payments/payment.entity';

/** Arguments of a `send_receipt` job. */
export interface SendReceiptArgs {
  paymentId: string;
}

/**
 * Writes the receipt of a succeeded payment (`GET /payments/:id/receipt`). Staged by the last
 * step of `CreatePaymentOperation`, so it exists exactly when the payment succeeded. The receipt
 * is written through the drainer's transaction, so it commits exactly when the job is deleted;
 * delivery is at least once, and the insert ignores a second delivery of the same job key.
 */
@IdempotentJobHandler('send_receipt')
export class SendReceiptJob implements IdempotencyJobHandlerInstance<SendReceiptArgs> {
  constructor(private readonly crash: CrashHook) {}

  /** @inheritDoc */
  async handle(job: StagedJob<SendReceiptArgs>, manager: EntityManager): Promise<void> {
    this.crash.at('after_job_taken', job.origin.key);
    const payment = await manager.findOneByOrFail(PaymentEntity, { id: job.args.paymentId });
    await manager.query(
      `INSERT INTO receipts (id, payment_id, job_key, amount, currency)
       VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [
        `rcpt_${randomBytes(12).toString('hex')}`,
        payment.id,
        job.key,
        payment.amount,
        payment.currency,
      ],
    );
  }
}
