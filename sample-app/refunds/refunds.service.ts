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
    const [{ refunded }] = await em.query(
      'SELECT COALESCE(SUM(amount), 0)::int AS refunded FROM refunds WHERE payment_id = $1',
      [paymentId],
    );
    const remaining = payment.amount - Number(refunded);
    if (dto.amount > remaining) {
      throw new BadRequestException({
        error: {
          type: 'invalid_request_error',
          code: 'refund_exceeds_payment',
          message: `Refund of ${dto.amount} is more than the ${remaining} left to refund on ${paymentId}.`,
        },
      });
    }
    const refund = em.create(RefundEntity, {
      id: `re_${randomBytes(12).toString('hex')}`,
      paymentId,
      amount: dto.amount,
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
