import { IdempotencyConfigurationError } from '../config/idempotency-configuration.error';
import type { IdempotencyStoreFactory } from './idempotency-store.factory';

/** What `nest-idempotency/typeorm`'s factory module exports, as far as the default needs it. */
interface TypeOrmStoreModule {
  typeOrmStore(): IdempotencyStoreFactory;
}

/** The packages the TypeORM store loads; missing, the default store cannot be made. */
const TYPEORM_PACKAGES = ['typeorm', '@nestjs/typeorm'];

/**
 * The store of `store: 'typeorm'` (the default): `typeOrmStore()` with every default, loaded
 * only now, so an application on another store never loads TypeORM (see `loadOptionalPeer` for
 * why `require` or `import()`).
 * @throws IdempotencyConfigurationError when TypeORM is not installed, saying what to do
 */
export async function defaultTypeOrmStore(): Promise<IdempotencyStoreFactory> {
  const path = './typeorm/typeorm-store.factory';
  try {
    const loaded = (
      typeof require === 'function'
        ? // eslint-disable-next-line @typescript-eslint/no-require-imports
          require(path)
        : await import(path)
    ) as TypeOrmStoreModule;
    return loaded.typeOrmStore();
  } catch (error) {
    const { code, message } = (error ?? {}) as NodeJS.ErrnoException;
    const missing = TYPEORM_PACKAGES.find((name) => String(message).includes(`'${name}'`));
    if ((code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') && missing) {
      throw IdempotencyConfigurationError.storeNotInstalled(missing);
    }
    throw error;
  }
}
