import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { IdempotentWebhook } from '../../lib/webhooks';
import { toRefundResponse } from '../refunds/refund.response';
import type { RefundResponse } from '../refunds/refund.response';
import { RefundsService } from '../refunds/refunds.service';
import { PROVIDER_WEBHOOK_SECRETS } from './provider-webhook.constants';

/** An event the payment provider delivers (only `charge.refunded` is acted on). */
export interface ProviderEvent {
  id: string;
  type: string;
  data?: { paymentId?: unknown; amount?: unknown };
}

/** What the webhook answers: the event, and the refund it recorded or why it recorded none. */
export interface ProviderEventAnswer {
  received: string;
  refund?: RefundResponse;
  ignored?: 'event_type' | 'invalid_data' | 'unknown_payment' | 'exceeds_payment';
}

/**
 * `POST /webhooks/provider`: the payment provider's webhook. Signed like Stripe's, in the
 * `Provider-Signature` header (`t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`) with
 * `WEBHOOK_SECRET`; each event is processed once, however many times it is delivered.
 */
@Controller('webhooks')
export class ProviderWebhooksController {
  constructor(private readonly refunds: RefundsService) {}

  /**
   * A `charge.refunded` event records one refund of the payment, in the transaction that
   * stores this answer; a duplicate delivery gets the same 200 back. Other events are
   * acknowledged and ignored. A bad signature is 400 problem+json, and nothing runs.
   */
  @Post('provider')
  @HttpCode(200)
  @IdempotentWebhook({
    provider: 'provider',
    signature: { scheme: 'stripe', header: 'Provider-Signature' },
    secrets: {
      inject: [PROVIDER_WEBHOOK_SECRETS],
      useFactory: (secrets: string[]) => secrets,
    },
    execution: { transactional: true },
  })
  async receive(@Body() event: ProviderEvent): Promise<ProviderEventAnswer> {
    if (event.type !== 'charge.refunded') return { received: event.id, ignored: 'event_type' };
    const { paymentId, amount } = event.data ?? {};
    if (typeof paymentId !== 'string' || !Number.isSafeInteger(amount) || (amount as number) <= 0) {
      return { received: event.id, ignored: 'invalid_data' };
    }
    const refund = await this.refunds.recordProviderRefund(paymentId, amount as number);
    return typeof refund === 'string'
      ? { received: event.id, ignored: refund }
      : { received: event.id, refund: toRefundResponse(refund) };
  }
}
