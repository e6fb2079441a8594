import type { ModuleRef } from '@nestjs/core';
import type { IdempotencyStore } from './idempotency.store';

/**
 * Builds the module's store at bootstrap, with access to the application's providers (a
 * DataSource, a client). `typeOrmStore()` from `nest-idempotency/typeorm` is one; give your own
 * to the `store` option to build a store that needs more than a class can inject.
 */
export interface IdempotencyStoreFactory {
  /**
   * @param moduleRef - the idempotency module's injector (`get(token, { strict: false })` finds
   *   the application's providers)
   * @returns the store, or a promise of it
   */
  create(moduleRef: ModuleRef): IdempotencyStore | Promise<IdempotencyStore>;
}
