import { Controller, Get, Query } from '@nestjs/common';
import { FakePaymentProvider } from './fake-payment-provider.service';
import type { ProviderChargeEntity } from './provider-charge.entity';

/** The fake provider's dashboard: shows that each payment was charged once. */
@Controller('provider/charges')
export class ProviderChargesController {
  constructor(private readonly provider: FakePaymentProvider) {}

  /**
   * `GET /provider/charges?customerId=` — the provider's charges, oldest first.
   * @param customerId - only this customer's charges, when given
   */
  @Get()
  list(@Query('customerId') customerId?: string): Promise<ProviderChargeEntity[]> {
    return this.provider.listCharges(customerId || undefined);
  }
}
