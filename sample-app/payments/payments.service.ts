import { randomBytes } from 'node:crypto';
import { Injectable, NotFoundException } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { IdempotencyContext } from '../../lib';
import { FakePaymentProvider } from '../provider/fake-payment-provider.service';
import type { CreatePaymentDto } from './create-payment.dto';
import { PaymentEntity } from './payment.entity';
import { toHttpError } from './provider-error.mapper';

/** Creates and reads payments. */
@Injectable()
export class PaymentsService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly idempotency: IdempotencyContext,
    private readonly provider: FakePaymentProvider,
  ) {}

  /**
   * Charges the customer and records the payment. Runs inside an
   * `@Idempotent({ transactional: true })` handler: the payment row is written in the
   * transaction that also stores the response, and the provider gets a key derived from the
   * idempotency record, so every retry of the request asks for the same charge.
   *
   * @throws HttpException 402 on a decline, 503/504 when the provider fails (not stored)
   */
  async create(accountId: string, dto: CreatePaymentDto): Promise<PaymentEntity> {
    const charge = await this.provider
      .charge({
        idempotencyKey: this.idempotency.derivedKey('charge'),
        customerId: dto.customerId,
        amount: dto.amount,
        currency: dto.currency,
      })
      .catch((error: unknown) => {
        throw toHttpError(error);
      });
    const payment = this.idempotency.entityManager.create(PaymentEntity, {
      id: `pay_${randomBytes(12).toString('hex')}`,
      accountId,
      amount: dto.amount,
      currency: dto.currency,
      customerId: dto.customerId,
      description: dto.description ?? null,
      status: 'succeeded',
      chargeId: charge.id,
      createdAt: new Date(),
    });
    await this.idempotency.entityManager.insert(PaymentEntity, payment);
    return payment;
  }

  /** The account's payments, newest first. */
  list(accountId: string): Promise<PaymentEntity[]> {
    return this.dataSource.getRepository(PaymentEntity).find({
      where: { accountId },
      order: { createdAt: 'DESC', id: 'DESC' },
    });
  }

  /**
   * One payment of the account.
   * @throws NotFoundException when it does not exist or belongs to another account
   */
  async get(accountId: string, id: string): Promise<PaymentEntity> {
    const payment = await this.dataSource.getRepository(PaymentEntity).findOneBy({ id, accountId });
    if (!payment) throw paymentNotFound(id);
    return payment;
  }
}

/** 404 for a payment that does not exist for this account. */
export function paymentNotFound(id: string): NotFoundException {
  return new NotFoundException({
    error: {
      type: 'invalid_request_error',
      code: 'resource_missing',
      message: `No such payment: ${id}`,
    },
  });
}
