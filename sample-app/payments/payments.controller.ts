import { Body, Controller, Get, Param, Post, Res, UseGuards } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { AccountId } from '../accounts/account-id.decorator';
import { AccountGuard } from '../accounts/account.guard';
import { CreatePaymentDto } from './create-payment.dto';
import { toPaymentResponse } from './payment.response';
import type { PaymentResponse } from './payment.response';
import { PaymentsService } from './payments.service';

/** `/payments`: every route needs `X-Account-Id`, which is also the idempotency scope. */
@Controller('payments')
@UseGuards(AccountGuard)
export class PaymentsController {
  constructor(private readonly payments: PaymentsService) {}

  /**
   * `POST /payments` — charges once per Idempotency-Key; retries get the stored answer.
   * Answers 201 with `Location: /payments/{id}`.
   */
  @Post()
  @Idempotent({ transactional: true })
  async create(
    @AccountId() accountId: string,
    @Body() dto: CreatePaymentDto,
    @Res({ passthrough: true }) response: { header(name: string, value: string): unknown },
  ): Promise<PaymentResponse> {
    const payment = await this.payments.create(accountId, dto);
    // `header()` exists on both Express responses and Fastify replies.
    response.header('Location', `/payments/${payment.id}`);
    return toPaymentResponse(payment);
  }

  /** `GET /payments` — the account's payments, newest first. */
  @Get()
  async list(@AccountId() accountId: string): Promise<PaymentResponse[]> {
    return (await this.payments.list(accountId)).map(toPaymentResponse);
  }

  /** `GET /payments/:id` — 404 when it belongs to another account. */
  @Get(':id')
  async get(@AccountId() accountId: string, @Param('id') id: string): Promise<PaymentResponse> {
    return toPaymentResponse(await this.payments.get(accountId, id));
  }
}
