import { Client, Pool } from 'pg';

/** application_name of the harness's own connections, so outages can spare them. */
export const HARNESS_APPLICATION_NAME = 'nest-idempotency-chaos';

/** A database created for one scenario of one chaos run. */
export interface ChaosDatabase {
  name: string;
  /** URL the sample app processes get as `DATABASE_URL`. */
  url: string;
  /** Runs a query on the harness's own pool (reconnects after an outage). */
  query<T = any>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Closes the pool and drops the database, unless `keep` is set. */
  close(keep: boolean): Promise<void>;
}

function withDatabase(serverUrl: string, name: string, applicationName?: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  if (applicationName) url.searchParams.set('application_name', applicationName);
  return url.toString();
}

/**
 * Runs one statement on the server's maintenance database through a short-lived connection.
 * @param serverUrl - any database URL on the server
 */
export async function adminQuery<T = any>(
  serverUrl: string,
  sql: string,
  params?: unknown[],
): Promise<T[]> {
  const client = new Client({
    connectionString: withDatabase(serverUrl, 'postgres', HARNESS_APPLICATION_NAME),
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query(sql, params as any[])).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Creates a database for one scenario: every payment, charge and record in it belongs to that
 * scenario, so counts need no filtering.
 *
 * @param serverUrl - PostgreSQL server URL (its database part is ignored)
 * @param name - a fresh identifier such as `chaos_20261122t0737_storm`
 * @param template - a database to copy (the sample app's schema, already migrated)
 */
export async function createChaosDatabase(
  serverUrl: string,
  name: string,
  template?: string,
): Promise<ChaosDatabase> {
  for (const identifier of [name, template ?? name]) {
    if (!/^[a-z_][a-z0-9_]*$/.test(identifier)) throw new Error(`bad database name ${identifier}`);
  }
  await adminQuery(serverUrl, `CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  const pool = new Pool({
    connectionString: withDatabase(serverUrl, name, HARNESS_APPLICATION_NAME),
    max: 4,
  });
  // Outages terminate idle connections too; the pool drops them and reconnects on demand.
  pool.on('error', () => undefined);
  return {
    name,
    url: withDatabase(serverUrl, name),
    query: async (sql, params) => (await pool.query(sql, params as any[])).rows,
    close: async (keep) => {
      await pool.end().catch(() => undefined);
      if (!keep) await adminQuery(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}
