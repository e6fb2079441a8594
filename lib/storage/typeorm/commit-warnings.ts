import { IdempotencyCommitUnconfirmedError } from '../commit-unconfirmed.error';

/** SQLSTATE of a plain WARNING, which a commit whose wait for its synchronous standby was cancelled gets. */
const WARNING_SQLSTATE = '01000';

/** A notice as node-postgres emits it (pg-protocol's `NoticeMessage`). */
interface PgNotice {
  message?: string;
  code?: string;
  detail?: string;
}

/** A pg client, as far as its notices go. */
interface NoticeSource {
  on(event: 'notice', listener: (notice: PgNotice) => void): unknown;
  removeListener(event: 'notice', listener: (notice: PgNotice) => void): unknown;
}

/**
 * Watches `client` for a WARNING while a commit runs on it, until the returned function is
 * called (once the commit answered, or the connection is handed back); that function gives the
 * error to reject with when a warning came. Matched on the SQLSTATE: pg gives the severity only
 * in the server's language (field S), and the message is translated too. A client that emits
 * no notices (not node-postgres) is not watched.
 * @param operation - the store call, named in the error
 */
export function watchCommitWarnings(
  client: unknown,
  operation: string,
): () => IdempotencyCommitUnconfirmedError | undefined {
  const source = client as Partial<NoticeSource> | null | undefined;
  if (typeof source?.on !== 'function' || typeof source.removeListener !== 'function') {
    return () => undefined;
  }
  let warning: PgNotice | undefined;
  const listener = (notice: PgNotice) => {
    if (notice?.code === WARNING_SQLSTATE) warning ??= notice;
  };
  source.on('notice', listener);
  return () => {
    source.removeListener!('notice', listener);
    if (!warning) return undefined;
    const text = [warning.message, warning.detail].filter(Boolean).join(' ');
    return new IdempotencyCommitUnconfirmedError(operation, text);
  };
}
