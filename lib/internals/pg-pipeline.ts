import { fellBack, internalEnabled } from './internal-switch';

/** The trick's name, for `NEST_IDEMPOTENCY_PLAIN`. */
export const PG_PIPELINE = 'pg-pipeline';

/** A node-postgres client, as far as this trick sees it. */
type PipelinedClient = { pipeline?: unknown };

/**
 * Whether a transaction's completion may be written with its `COMMIT` in one round trip, by
 * turning on node-postgres's `pipeline` flag on the transaction's client for those two queries.
 * pg (8.23 and later) takes `pipeline` as a constructor option; setting it on a live client is
 * not its API, so this is checked once at startup on a client of the application's pool: the
 * flag must be a boolean there. When it is not (an older or changed pg), or
 * `NEST_IDEMPOTENCY_PLAIN` names `pg-pipeline`, the completion is answered before the `COMMIT`
 * is sent: one round trip more, the same outcome. docs/design/internals.md has the measured gain.
 * @param client - a client lent by the pool, as TypeORM's `QueryRunner.connect()` returns it
 */
export function pgPipelineUsable(client: unknown): boolean {
  if (!internalEnabled(PG_PIPELINE)) return false;
  if (typeof (client as PipelinedClient | null)?.pipeline === 'boolean') return true;
  fellBack(PG_PIPELINE, "this node-postgres client has no boolean 'pipeline' flag");
  return false;
}

/**
 * Puts a client `pgPipelineUsable()` accepted in pipeline mode until the returned function is
 * called: queries are written without waiting for the previous one's answer.
 */
export function pipelining(client: unknown): () => void {
  const pg = client as PipelinedClient;
  if (pg.pipeline) return () => undefined;
  pg.pipeline = true;
  return () => {
    pg.pipeline = false;
  };
}
