import { Inject, Module } from '@nestjs/common';
import type { DynamicModule, OnModuleInit, Provider } from '@nestjs/common';
import { DiscoveryModule, ModuleRef, ModulesContainer } from '@nestjs/core';
import { IdempotencyContext } from '../context/idempotency.context';
import { markCoveredControllers } from '../decorators/handler-start';
import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import { IdempotencyExceptionFilter } from '../errors/idempotency-exception.filter';
import { IdempotencyEvents } from '../events/idempotency.events';
import { resolveIdempotencyOptions } from '../config/idempotency.defaults';
import { IdempotencyExecutionFactory } from '../execution/idempotency-execution.factory';
import { IdempotencyRunner } from '../execution/idempotency-runner';
import { ResponseAdapterResolver } from '../http/response-adapter.resolver';
import { IdempotencyGuard } from './idempotency.guard';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import {
  IDEMPOTENCY_ASYNC_OPTIONS_TYPE,
  IDEMPOTENCY_MODULE_OPTIONS,
  IDEMPOTENCY_OPTIONS_TYPE,
  IdempotencyConfigurableModule,
} from '../config/idempotency.module-definition';
import { IdempotencyRouteOptionsResolver } from '../decorators/idempotency-route-options.resolver';
import { IDEMPOTENCY_BOOTSTRAP_WARNINGS, warnAtBootstrap } from './idempotency-bootstrap.warnings';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import type {
  IdempotencyModuleOptions,
  ResolvedIdempotencyOptions,
} from '../interfaces/idempotency-module-options.interface';
import { IdempotencyMetrics } from '../metrics/idempotency-metrics';
import { IDEMPOTENCY_OPENAPI, documentIdempotentRoutes } from '../openapi/idempotency-openapi';
import { IdempotencyPurgeService } from '../purge/idempotency-purge.service';
import { IdempotencyStore } from '../storage/idempotency.store';
import type { IdempotencyStoreCapabilities } from '../storage/idempotency-store.capabilities';
import { MemoryIdempotencyStore } from '../storage/memory-idempotency.store';
import { defaultTypeOrmStore } from '../storage/default-typeorm-store';
import { LocalFirstIdempotencyStore } from '../storage/local-first-idempotency.store';
import { IdempotencyWaiters } from '../waiting/idempotency-waiters';
import { RecordSealer } from '../storage/sealed/record-sealer';

async function createStore(
  options: ResolvedIdempotencyOptions,
  moduleRef: ModuleRef,
): Promise<IdempotencyStore> {
  const { store, replayCache, encryption } = options;
  const given = store === 'typeorm' ? await defaultTypeOrmStore() : store;
  // The store that decides every claim this instance cannot answer itself.
  const deciding =
    given === 'memory'
      ? new MemoryIdempotencyStore()
      : typeof given === 'function'
        ? await moduleRef.create(given)
        : await given.create(moduleRef);
  return new LocalFirstIdempotencyStore(deciding, {
    maxEntries: replayCache.enabled ? replayCache.maxEntries : 0,
    maxBytes: replayCache.maxBytes,
    // Without keys when encryption is off: a sealed record is then refused (500), never
    // replayed as ciphertext.
    sealer: new RecordSealer(encryption),
  });
}

/** The module's own classes: each is provided here and exported to the modules that import it. */
const SERVICES = [
  IdempotencyRouteOptionsResolver,
  ResponseAdapterResolver,
  IdempotencyExecutionFactory,
  IdempotencyRunner,
  IdempotencyEvents,
  IdempotencyMetrics,
  IdempotencyGuard,
  IdempotencyInterceptor,
  IdempotencyExceptionFilter,
  IdempotencyContext,
  IdempotencyPurgeService,
  IdempotencyWaiters,
];

const providers: Provider[] = [
  {
    provide: IDEMPOTENCY_OPTIONS,
    useFactory: (options: IdempotencyModuleOptions | undefined, modules: ModulesContainer) => {
      // Only forRoot()/forRootAsync() provide the options: the bare class was imported.
      if (options === undefined) throw IdempotencyConfigurationError.moduleNotConfigured();
      // First of all, before a store connects: one configuration per application.
      const instances = [...modules.values()].filter((m) => m.metatype === IdempotencyModule);
      if (instances.length > 1) {
        throw IdempotencyConfigurationError.moduleConfiguredTwice(instances.length);
      }
      return resolveIdempotencyOptions(options);
    },
    inject: [{ token: IDEMPOTENCY_MODULE_OPTIONS, optional: true }, ModulesContainer],
  },
  {
    provide: IdempotencyStore,
    useFactory: createStore,
    inject: [IDEMPOTENCY_OPTIONS, ModuleRef],
  },
  {
    // Asked once: each feature uses the ability it needs, or is unavailable without it.
    provide: IDEMPOTENCY_STORE_CAPABILITIES,
    useFactory: (store: IdempotencyStore) => store.capabilities(),
    inject: [IdempotencyStore],
  },
  {
    // Documents @Idempotent() routes for @nestjs/swagger, when installed (before createDocument).
    provide: IDEMPOTENCY_OPENAPI,
    useFactory: documentIdempotentRoutes,
    inject: [IDEMPOTENCY_OPTIONS, ModulesContainer],
  },
  {
    // Warns at bootstrap when unauthenticated callers would share the default scope, and about
    // @Idempotent() on GET, HEAD or OPTIONS handlers, which it never covers.
    provide: IDEMPOTENCY_BOOTSTRAP_WARNINGS,
    useFactory: warnAtBootstrap,
    inject: [IDEMPOTENCY_OPTIONS, ModulesContainer],
  },
  ...SERVICES,
];

/**
 * Makes `@Idempotent()` routes safe to retry. Uses the application's TypeORM DataSource (it
 * never calls `TypeOrmModule.forRoot` itself); global by default.
 *
 * An application imports it once: a second `forRoot()`/`forRootAsync()` fails at bootstrap.
 * With `isGlobal: false`, import `forRoot()` in the module that declares the `@Idempotent()`
 * controllers: the guard, interceptor and filter the decorator binds are built in that module,
 * from its imports. Several feature modules share it through a module that imports `forRoot()`
 * once and re-exports `IdempotencyModule`.
 *
 * @throws IdempotencyConfigurationError at bootstrap when the application imports it twice
 *
 * @example
 * \@Module({
 *   imports: [
 *     TypeOrmModule.forRoot({ type: 'postgres', url, migrations: [CreateIdempotencyRecords1732233600000], migrationsRun: true }),
 *     IdempotencyModule.forRoot({ responses: { ttlSeconds: 86400 } }),
 *   ],
 * })
 * export class AppModule {}
 */
@Module({
  imports: [DiscoveryModule],
  providers,
  exports: [IDEMPOTENCY_OPTIONS, IdempotencyStore, IDEMPOTENCY_STORE_CAPABILITIES, ...SERVICES],
})
export class IdempotencyModule extends IdempotencyConfigurableModule implements OnModuleInit {
  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    @Inject(IDEMPOTENCY_STORE_CAPABILITIES)
    private readonly capabilities: IdempotencyStoreCapabilities,
    modules: ModulesContainer,
  ) {
    super();
    // Before Nest registers routes: a base class's @Idempotent() covers its subclasses' routes.
    markCoveredControllers(
      [...modules.values()].flatMap((module) =>
        [...module.controllers.values()].map((wrapper) => wrapper.metatype),
      ),
    );
  }

  /** Checks the store at bootstrap (DataSource found, PostgreSQL, tables in place). */
  async onModuleInit(): Promise<void> {
    await this.capabilities.verify?.();
  }

  /**
   * Registers the module with options known up front.
   * @param options - any subset of the options; the rest come from DEFAULT_IDEMPOTENCY_OPTIONS
   * @throws IdempotencyConfigurationError at bootstrap when an option is invalid
   */
  static override forRoot(options: typeof IDEMPOTENCY_OPTIONS_TYPE = {}): DynamicModule {
    return super.forRoot(options);
  }

  /**
   * Registers the module with options from a factory, a class or an existing provider.
   * @param options - `useFactory` + `inject`, `useClass` or `useExisting` (a class that
   *   implements `IdempotencyOptionsFactory`), plus `imports`, `isGlobal` and `extraProviders`
   * @throws IdempotencyConfigurationError at bootstrap when an option is invalid
   */
  static override forRootAsync(options: typeof IDEMPOTENCY_ASYNC_OPTIONS_TYPE): DynamicModule {
    return super.forRootAsync(options);
  }
}
