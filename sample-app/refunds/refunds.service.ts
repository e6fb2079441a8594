import { randomBytes } from 'node:crypto';
import { BadRequestException, Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { IdempotencyContext } from '../../lib';
import { PaymentEntity } from '../payments/payment.entity';
import { paymentNotFound } from '../payments/payments.service';
import type { CreateRefundDto } from './create-refund.dto';
import { RefundEntity } from './refund.entity';

/** Creates and reads refunds. */
@Injectable()
export class RefundsService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly idempotency: IdempotencyContext,
  ) {}

  /**
   * Refunds part of a payment, inside the transaction that stores the response. The payment
   * row is locked first, so concurrent refunds (with different keys) cannot over-refund.
   *
   * @throws NotFoundException when the payment is not the account's
   * @throws BadRequestException when the amount is more than what is left (stored and replayed)
   */
  async create(accountId: string, paymentId: string, dto: CreateRefundDto): Promise<RefundEntity> {
    const em = this.idempotency.entityManager;
    const payment = await em.getRepository(PaymentEntity).findOne({
      where: { id: paymentId, accountId },
      lock: { mode: 'pessimistic_write' },
    });
    if (!payment) throw paymentNotFound(paymentId);
    const remaining = await this.remaining(payment);
    if (dto.amount > remaining) {
      throw new BadRequestException({
        error: {
          type: 'invalid_request_error',
          code: 'refund_exceeds_payment',
          message: `Refund of ${dto.amount} is more than the ${remaining} left to refund on ${paymentId}.`,
        },
      });
    }
    return this.insert(paymentId, dto.amount);
  }

  /**
   * Records a refund the provider made (its `charge.refunded` webhook), inside the transaction
   * that stores the webhook's answer, whatever account the payment belongs to.
   * @returns the refund, or why none was recorded (an unknown payment, more than is left)
   */
  async recordProviderRefund(
    paymentId: string,
    amount: number,
  ): Promise<RefundEntity | 'unknown_payment' | 'exceeds_payment'> {
    const payment = await this.idempotency.entityManager.getRepository(PaymentEntity).findOne({
      where: { id: paymentId },
      lock: { mode: 'pessimistic_write' },
    });
    if (!payment) return 'unknown_payment';
    if (amount > (await this.remaining(payment))) return 'exceeds_payment';
    return this.insert(paymentId, amount);
  }

  /** What is left to refund of a payment whose row the transaction locked. */
  private async remaining(payment: PaymentEntity): Promise<number> {
    const [{ refunded }] = await this.idempotency.entityManager.query(
      'SELECT COALESCE(SUM(amount), 0)::int AS refunded FROM refunds WHERE payment_id = $1',
      [payment.id],
    );
    return payment.amount - Number(refunded);
  }

  private async insert(paymentId: string, amount: number): Promise<RefundEntity> {
    const em = this.idempotency.entityManager;
    const refund = em.create(RefundEntity, {
      id: `re_${randomBytes(12).toString('hex')}`,
      paymentId,
      amount,
      createdAt: new Date(),
    });
    await em.insert(RefundEntity, refund);
    return refund;
  }

  /**
   * The refunds of one of the account's payments, oldest first.
   * @throws NotFoundException when the payment is not the account's
   */
  async list(accountId: string, paymentId: string): Promise<RefundEntity[]> {
    const payment = await this.dataSource
      .getRepository(PaymentEntity)
      .existsBy({ id: paymentId, accountId });
    if (!payment) throw paymentNotFound(paymentId);
    return this.dataSource.getRepository(RefundEntity).find({
      where: { paymentId },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
  }
}
