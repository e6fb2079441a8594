import { Body, Controller, Get, Param, Post, UseGuards } from '@nestjs/common';
import { Idempotent } from '../../lib';
import { IdempotencyOperations } from '../../lib/phases';
import { AccountId } from '../accounts/account-id.decorator';
import { AccountGuard } from '../accounts/account.guard';
import { toReceiptResponse } from '../receipts/receipt.response';
import type { ReceiptResponse } from '../receipts/receipt.response';
import { CreatePaymentDto } from './create-payment.dto';
import { CreatePaymentOperation } from './create-payment.operation';
import type { CreatePaymentOutput } from './create-payment.operation';
import { toPaymentResponse } from './payment.response';
import type { PaymentResponse } from './payment.response';
import { PaymentsService } from './payments.service';

/** `/payments`: every route needs `X-Account-Id`, which is also the idempotency scope. */
@Controller('payments')
@UseGuards(AccountGuard)
export class PaymentsController {
  constructor(
    private readonly payments: PaymentsService,
    private readonly operations: IdempotencyOperations,
  ) {}

  /**
   * `POST /payments` — charges once per Idempotency-Key, in atomic phases (see
   * `CreatePaymentOperation`); retries get the stored answer. Answers 201 with
   * `Location: /payments/{id}`, or 402 when the card is declined. A retry that arrives while
   * the first request still runs gets 409, unless it sends `Prefer: wait=N`: then it waits up
   * to N seconds (at most 10) for the first request and gets its answer.
   */
  @Post()
  @Idempotent({ wait: { maxSeconds: 10 } })
  create(
    @AccountId() accountId: string,
    @Body() dto: CreatePaymentDto,
  ): Promise<CreatePaymentOutput> {
    return this.operations.run(CreatePaymentOperation, { ...dto, accountId });
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

  /** `GET /payments/:id/receipt` — 404 until the staged `send_receipt` job has written it. */
  @Get(':id/receipt')
  async receipt(@AccountId() accountId: string, @Param('id') id: string): Promise<ReceiptResponse> {
    return toReceiptResponse(await this.payments.receipt(accountId, id));
  }
}
