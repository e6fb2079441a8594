import { Inject, Module } from '@nestjs/common';
import type { DynamicModule, OnModuleInit } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { IdempotencyJobs } from './jobs/idempotency-jobs.service';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import { IdempotencyCompleter } from './idempotency-completer.service';
import { OperationRunner } from './operation-runner';
import { resolveIdempotencyPhasesOptions } from './idempotency-phases.defaults';
import type {
  IdempotencyPhasesModuleOptions,
  ResolvedIdempotencyPhasesOptions,
} from './idempotency-phases.options';
import { IDEMPOTENCY_PHASES_OPTIONS } from './idempotency-phases.tokens';
import { IdempotencyOperations } from './idempotency-operations.service';
import { IdempotencyOperationRegistry } from './operation-registry';

/**
 * Operations in phases and staged jobs, on top of `IdempotencyModule` (which must be global, its
 * default, or imported beside this one). Discovers the application's `@IdempotentOperation()`
 * and `@IdempotentJobHandler()` providers at bootstrap, checks that each foreign step fits in a
 * lease, and runs the completer and the drainer. Global: `IdempotencyOperations` can be injected
 * anywhere. Needs a store with the `operations` ability (the TypeORM store).
 *
 * @example
 * \@Module({
 *   imports: [IdempotencyModule.forRoot(), IdempotencyPhasesModule.forRoot({ completer: { afterSeconds: 30 } })],
 *   providers: [CreatePaymentOperation, SendReceiptJob],
 * })
 * export class AppModule {}
 */
@Module({})
export class IdempotencyPhasesModule implements OnModuleInit {
  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly registry: IdempotencyOperationRegistry,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_PHASES_OPTIONS) private readonly phases: ResolvedIdempotencyPhasesOptions,
  ) {}

  /**
   * Registers operations in phases and staged jobs.
   * @param options - any subset; the rest come from `DEFAULT_IDEMPOTENCY_PHASES_OPTIONS`
   * @throws IdempotencyConfigurationError at bootstrap when an option is invalid
   */
  static forRoot(options: IdempotencyPhasesModuleOptions = {}): DynamicModule {
    return {
      module: IdempotencyPhasesModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [
        {
          provide: IDEMPOTENCY_PHASES_OPTIONS,
          useFactory: () => resolveIdempotencyPhasesOptions(options),
        },
        IdempotencyOperationRegistry,
        OperationRunner,
        IdempotencyOperations,
        IdempotencyCompleter,
        IdempotencyJobs,
      ],
      exports: [IdempotencyOperations, IdempotencyCompleter, IdempotencyJobs],
    };
  }

  /** Finds the operations and job handlers, and checks each foreign step fits in a lease. */
  onModuleInit(): void {
    const { lockTimeoutSeconds } = this.options;
    this.registry.checkForeignSteps(lockTimeoutSeconds, this.phases.foreignStepMarginSeconds);
  }
}
