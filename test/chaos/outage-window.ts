import {
  ensureServerRunning,
  setDatabaseConnectable,
  startCluster,
  stopCluster,
  terminateAppConnections,
  waitForServer,
} from './postgres-control';
import type { LocalCluster } from './postgres-control';

/**
 * How the database is taken away: `server-stop` stops the whole local PostgreSQL cluster
 * (`pg_ctlcluster … stop -m fast`); `connections-cut` makes only the scenario's database refuse
 * new connections and terminates the app's existing ones (`pg_terminate_backend`), which is safe
 * on a shared server (CI).
 */
export type OutageMode = 'server-stop' | 'connections-cut';

/** When the database was unreachable, on the chaos client's clock (milliseconds). */
export interface OutageWindow {
  mode: OutageMode;
  /** The outage began (stop issued, or connections refused). */
  downAt: number;
  /** The database was certainly unreachable from here… */
  fullyDownAt: number;
  /** …to here (start issued, or connections allowed again). */
  restoringAt: number;
  /** The database answers again. */
  upAt: number;
  /** App connections terminated (`connections-cut`). */
  terminatedConnections?: number;
}

/** One database outage: `run()` takes the database away and brings it back. */
export class DatabaseOutage {
  private window?: OutageWindow;

  /**
   * @param options.cluster - required for `server-stop`
   * @param options.now - the clock the window is reported on
   */
  constructor(
    private readonly options: {
      mode: OutageMode;
      serverUrl: string;
      database: string;
      cluster?: LocalCluster;
      downMs: number;
      now: () => number;
    },
  ) {}

  /**
   * Takes the database away for `downMs`, then brings it back and waits until it answers.
   * The database is back even when this throws.
   * @returns the window during which it was unreachable
   */
  async run(): Promise<OutageWindow> {
    const { mode, serverUrl, database, cluster, downMs, now } = this.options;
    const window: OutageWindow = { mode, downAt: now(), fullyDownAt: 0, restoringAt: 0, upAt: 0 };
    this.window = window;
    try {
      if (mode === 'server-stop') {
        await stopCluster(cluster!);
      } else {
        await setDatabaseConnectable(serverUrl, database, false);
        window.terminatedConnections = await terminateAppConnections(serverUrl, database);
      }
      window.fullyDownAt = now();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      if (mode === 'connections-cut') {
        // Anything that slipped in between the two statements above.
        window.terminatedConnections! += await terminateAppConnections(serverUrl, database);
      }
    } finally {
      window.restoringAt = now();
      await this.restore();
      window.upAt = now();
    }
    return window;
  }

  /** Brings the database back (idempotent); also used when the run is interrupted. */
  async restore(): Promise<void> {
    const { mode, serverUrl, database, cluster } = this.options;
    if (!this.window) return;
    if (mode === 'server-stop') {
      await startCluster(cluster!);
      await waitForServer(serverUrl);
    } else {
      await ensureServerRunning(serverUrl, cluster);
      await setDatabaseConnectable(serverUrl, database, true);
    }
  }
}
