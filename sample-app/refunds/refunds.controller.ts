import { Body, Controller, Get, Param, Post, UseGuards } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { AccountId } from '../accounts/account-id.decorator';
import { AccountGuard } from '../accounts/account.guard';
import { CreateRefundDto } from './create-refund.dto';
import { toRefundResponse } from './refund.response';
import type { RefundResponse } from './refund.response';
import { RefundsService } from './refunds.service';

/** `/payments/:paymentId/refunds`: needs `X-Account-Id` like every `/payments` route. */
@Controller('payments/:paymentId/refunds')
@UseGuards(AccountGuard)
export class RefundsController {
  constructor(private readonly refunds: RefundsService) {}

  /**
   * `POST /payments/:paymentId/refunds` — 201 with the refund; 400 (stored and replayed) when
   * it is more than what is left; 404 for another account's payment.
   */
  @Post()
  @Idempotent({ execution: { transactional: true } })
  async create(
    @AccountId() accountId: string,
    @Param('paymentId') paymentId: string,
    @Body() dto: CreateRefundDto,
  ): Promise<RefundResponse> {
    return toRefundResponse(await this.refunds.create(accountId, paymentId, dto));
  }

  /** `GET /payments/:paymentId/refunds` — the payment's refunds, oldest first. */
  @Get()
  async list(
    @AccountId() accountId: string,
    @Param('paymentId') paymentId: string,
  ): Promise<RefundResponse[]> {
    return (await this.refunds.list(accountId, paymentId)).map(toRefundResponse);
  }
}
