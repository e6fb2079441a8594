import { Module } from '@nestjs/common';
import { SendReceiptJob } from '../receipts/send-receipt.job';
import { RefundsController } from '../refunds/refunds.controller';
import { RefundsService } from '../refunds/refunds.service';
import { CreatePaymentOperation } from './create-payment.operation';
import { PaymentsController } from './payments.controller';
import { PaymentsService } from './payments.service';

/** Payments (an operation in phases, and the receipt job it stages) and their refunds. */
@Module({
  controllers: [PaymentsController, RefundsController],
  providers: [PaymentsService, RefundsService, CreatePaymentOperation, SendReceiptJob],
})
export class PaymentsModule {}
