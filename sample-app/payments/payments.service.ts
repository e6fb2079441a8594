import { Injectable, NotFoundException } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { ReceiptEntity } from '../receipts/receipt.entity';
import { PaymentEntity } from './payment.entity';

/** Reads payments and their receipts. (`POST /payments` is `CreatePaymentOperation`.) */
@Injectable()
export class PaymentsService {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

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

  /**
   * The receipt of one payment of the account, written by the staged `send_receipt` job.
   * @throws NotFoundException until the job has run, or when the payment is not the account's
   */
  async receipt(accountId: string, id: string): Promise<ReceiptEntity> {
    await this.get(accountId, id);
    const receipt = await this.dataSource.getRepository(ReceiptEntity).findOneBy({ paymentId: id });
    if (!receipt) {
      throw new NotFoundException({
        error: {
          type: 'invalid_request_error',
          code: 'resource_missing',
          message: `No receipt yet for payment: ${id}`,
        },
      });
    }
    return receipt;
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
