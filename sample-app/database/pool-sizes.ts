/** Connections in the app's TypeORM pool (`extra.max`). */
export const APP_POOL_SIZE = 10;
