import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { FakePaymentProvider } from './fake-payment-provider.service';
import { ProviderChargesController } from './provider-charges.controller';
import { PROVIDER_LATENCY_MS } from './provider.constants';

/** The fake payment provider and its `GET /provider/charges` endpoint; global once registered. */
@Module({})
export class ProviderModule {
  /**
   * @param latencyMs - delay of each provider call (`PROVIDER_LATENCY_MS`)
   */
  static register(latencyMs: number): DynamicModule {
    return {
      module: ProviderModule,
      global: true,
      controllers: [ProviderChargesController],
      providers: [FakePaymentProvider, { provide: PROVIDER_LATENCY_MS, useValue: latencyMs }],
      exports: [FakePaymentProvider],
    };
  }
}
