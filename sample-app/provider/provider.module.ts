import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { FakePaymentProvider } from './fake-payment-provider.service';
import { ProviderChargesController } from './provider-charges.controller';
import { PROVIDER_CHARGE_TIMEOUT_SECONDS, PROVIDER_LATENCY_MS } from './provider.constants';

/** The fake payment provider and its `GET /provider/charges` endpoint; global once registered. */
@Module({})
export class ProviderModule {
  /**
   * @param latencyMs - delay of each provider call (`PROVIDER_LATENCY_MS`)
   * @param chargeTimeoutSeconds - the longest the app waits for a charge
   */
  static register(latencyMs: number, chargeTimeoutSeconds: number): DynamicModule {
    return {
      module: ProviderModule,
      global: true,
      controllers: [ProviderChargesController],
      providers: [
        FakePaymentProvider,
        { provide: PROVIDER_LATENCY_MS, useValue: latencyMs },
        { provide: PROVIDER_CHARGE_TIMEOUT_SECONDS, useValue: chargeTimeoutSeconds },
      ],
      exports: [FakePaymentProvider, PROVIDER_CHARGE_TIMEOUT_SECONDS],
    };
  }
}
