import { spawnSampleApp } from '../fixtures/sample-app-process';
import { createChaosDatabase } from './chaos-database';
import type { ChaosDatabase } from './chaos-database';

/**
 * Creates a database holding the sample app's schema, migrated by one sample app process that
 * is then stopped. Scenario databases are copied from it (`CREATE DATABASE … TEMPLATE`), so
 * their app processes can start side by side: the app's migrations are not safe to run from
 * two processes at once on an empty database.
 *
 * @param serverUrl - PostgreSQL server URL
 * @param name - name of the template database
 * @returns the template database; `close(false)` drops it
 */
export async function createSchemaTemplate(
  serverUrl: string,
  name: string,
): Promise<ChaosDatabase> {
  const template = await createChaosDatabase(serverUrl, name);
  try {
    const app = await spawnSampleApp({ DATABASE_URL: template.url });
    const exit = await app.stop('SIGTERM');
    if (exit !== 0) throw new Error(`the schema migration process exited with ${exit}`);
    await template.close(true);
    return template;
  } catch (error) {
    await template.close(false);
    throw error;
  }
}
