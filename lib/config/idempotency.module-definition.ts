import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { Provider } from '@nestjs/common';
import type {
  IdempotencyModuleOptions,
  IdempotencyOptionsFactory,
} from '../interfaces/idempotency-module-options.interface';

/** Extra settings of `forRoot()` / `forRootAsync()` that are not options of the library. */
export interface IdempotencyModuleExtras {
  /** Register the module globally (so every feature module's controllers can use it). */
  isGlobal: boolean;
  /** Providers added to the module, e.g. what a `useClass` options factory needs. */
  extraProviders: Provider[];
}

// Typed by the public interface, so the method `useClass` must have and its name cannot drift apart.
const FACTORY_METHOD: keyof IdempotencyOptionsFactory = 'createIdempotencyOptions';

export const {
  ConfigurableModuleClass: IdempotencyConfigurableModule,
  MODULE_OPTIONS_TOKEN: IDEMPOTENCY_MODULE_OPTIONS,
  OPTIONS_TYPE: IDEMPOTENCY_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: IDEMPOTENCY_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<IdempotencyModuleOptions>({ moduleName: 'Idempotency' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName(FACTORY_METHOD)
  .setExtras<IdempotencyModuleExtras>(
    { isGlobal: true, extraProviders: [] },
    (definition, extras) => ({
      ...definition,
      global: extras.isGlobal,
      providers: [...(definition.providers ?? []), ...extras.extraProviders],
    }),
  )
  .build();
