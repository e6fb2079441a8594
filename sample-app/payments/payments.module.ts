import { Module } from '@nestjs/common';
import { SendReceiptJob } from '../receipts/send-receipt.job';
import { RefundsController } from '../refunds/refunds.controller';
import { RefundsService } from '../refunds/refunds.service';
import { CreatePaymentOperation } from './create-payment.operation';
import { PaymentsController } from './payments.controller';
import { PaymentsService } from './payments.service';
import { ProviderWebhooksController } from '../webhooks/provider-webhooks.controller';

/**
 * Payments (an operation in phases, and the receipt job it stages) and their refunds, made by
 * the API or reported by the provider's webhook.
 */
@Module({
  controllers: [PaymentsController, RefundsController, ProviderWebhooksController],
  providers: [PaymentsService, RefundsService, CreatePaymentOperation, SendReceiptJob],
})
export class PaymentsModule {}
