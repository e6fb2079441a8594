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
 * PGlite has one session. The socket server accepts up to `maxConnections` connections and runs
 * them all in that session, one protocol message batch at a time: concurrent connections see
 * each other's named prepared statements ("already exists") and lose their unnamed portals
 * ("portal \"\" does not exist") when a batch is split. So the sample gives its pool one
 * connection on PGlite; `maxConnections` only has to be at least that.
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
