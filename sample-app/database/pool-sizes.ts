/** Connections in the app's TypeORM pool (`extra.max`). */
export const APP_POOL_SIZE = 10;

/** Connections in the fake provider's TypeORM pool (`extra.max`). */
export const PROVIDER_POOL_SIZE = 4;
