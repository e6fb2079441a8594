import { Module } from '@nestjs/common';
import { RefundsController } from '../refunds/refunds.controller';
import { RefundsService } from '../refunds/refunds.service';
import { PaymentsController } from './payments.controller';
import { PaymentsService } from './payments.service';

/** Payments and their refunds. */
@Module({
  controllers: [PaymentsController, RefundsController],
  providers: [PaymentsService, RefundsService],
})
export class PaymentsModule {}
