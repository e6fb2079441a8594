import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { HARNESS_APPLICATION_NAME, adminQuery } from './chaos-database';

const run = promisify(execFile);

/** The local PostgreSQL cluster `pg_ctlcluster` controls, e.g. `{ version: '15', name: 'main' }`. */
export interface LocalCluster {
  version: string;
  name: string;
}

/**
 * Finds the local cluster listening on the server URL's port, when the server is local and
 * `pg_lsclusters` exists (Debian's postgresql-common). `undefined` otherwise.
 *
 * @param serverUrl - PostgreSQL server URL
 */
export async function findLocalCluster(serverUrl: string): Promise<LocalCluster | undefined> {
  const url = new URL(serverUrl);
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(url.hostname)) return undefined;
  const port = url.port || '5432';
  try {
    const { stdout } = await run('pg_lsclusters', ['--no-header']);
    for (const line of stdout.split('\n')) {
      const [version, name, clusterPort] = line.trim().split(/\s+/);
      if (clusterPort === port) return { version, name };
    }
  } catch {
    // not a Debian-style installation
  }
  return undefined;
}

/** Stops the cluster (`fast` mode: open transactions are rolled back, clients cut off). */
export async function stopCluster(cluster: LocalCluster): Promise<void> {
  await run('pg_ctlcluster', [
    '--skip-systemctl-redirect',
    cluster.version,
    cluster.name,
    'stop',
    '-m',
    'fast',
  ]);
}

/** Starts the cluster; a cluster that is already running is left alone. */
export async function startCluster(cluster: LocalCluster): Promise<void> {
  try {
    await run('pg_ctlcluster', [
      '--skip-systemctl-redirect',
      cluster.version,
      cluster.name,
      'start',
    ]);
  } catch (error) {
    // Exit code 2: already running.
    if ((error as { code?: number }).code !== 2) throw error;
  }
}

/**
 * Resolves once the server answers `SELECT 1`.
 * @throws Error when it does not within `timeoutMs`
 */
export async function waitForServer(serverUrl: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await adminQuery(serverUrl, 'SELECT 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/**
 * Makes sure the server runs again after an outage (started when it does not answer).
 * @param cluster - the local cluster, when the run may start it
 */
export async function ensureServerRunning(
  serverUrl: string,
  cluster: LocalCluster | undefined,
): Promise<void> {
  try {
    await waitForServer(serverUrl, 1000);
  } catch {
    if (cluster) await startCluster(cluster);
    await waitForServer(serverUrl);
  }
}

/**
 * Refuses (or allows again) new connections to one database: the app's pools cannot reconnect
 * until it is allowed again. Only that database is affected.
 */
export async function setDatabaseConnectable(
  serverUrl: string,
  database: string,
  connectable: boolean,
): Promise<void> {
  await adminQuery(serverUrl, `ALTER DATABASE ${database} ALLOW_CONNECTIONS ${connectable}`);
}

/**
 * Terminates every connection to the database except the harness's own.
 * @returns how many backends were terminated
 */
export async function terminateAppConnections(
  serverUrl: string,
  database: string,
): Promise<number> {
  const rows = await adminQuery<{ ok: boolean }>(
    serverUrl,
    `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE datname = $1 AND pid <> pg_backend_pid() AND application_name <> $2`,
    [database, HARNESS_APPLICATION_NAME],
  );
  return rows.filter((row) => row.ok).length;
}
