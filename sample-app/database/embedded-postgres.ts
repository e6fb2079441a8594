import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

/** A PGlite database served over the PostgreSQL wire protocol on a local port. */
export interface EmbeddedPostgres {
  /** `postgres://` URL the ordinary `pg` driver connects to. */
  url: string;
  /** Stops the socket server and closes the database. */
  stop(): Promise<void>;
}

/**
 * Starts an in-memory PGlite database behind `PGLiteSocketServer`, so the app reaches it with
 * the ordinary `pg` driver (TypeORM type `postgres`) exactly as it would a real server.
 *
 * PGlite runs one statement at a time for all connections, and while one connection has a
 * transaction open the others wait; the socket server multiplexes up to `maxConnections`
 * connections, so it must be at least the TypeORM pool size (extra connections are refused).
 *
 * @param maxConnections - connections the socket server accepts; ≥ the pool size
 * @returns the URL and a `stop()` function
 */
export async function startEmbeddedPostgres(maxConnections: number): Promise<EmbeddedPostgres> {
  const db = await PGlite.create();
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections });
  await server.start();
  const url = `postgres://postgres@${server.getServerConn()}/postgres`;
  return {
    url,
    stop: async () => {
      await server.stop();
      await db.close();
    },
  };
}
