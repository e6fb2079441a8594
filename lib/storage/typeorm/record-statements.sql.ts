import { healthSql } from './health-statement.sql';
import { quoteTableName } from './idempotency-table.sql';
import { wakeUpChannelOf } from './typeorm-wake-ups';
import { announcedWrite, failUnlessWritten, notifyWritten } from './wake-up-statements.sql';

// The statements of a request's record (claim, completion, release, renewal, purge) and the
// bootstrap check of its table. The clock they read and write by is described on
// `TypeOrmIdempotencyStore`.

/**
 * What `TypeOrmIdempotencyStore.verify()` reads at bootstrap: whether the record table and its
 * jobs table exist, and their columns. `$1` is the record table, `$2` its jobs table.
 */
const RECORD_TABLE_CHECK_SQL = `
  SELECT to_regclass($1) IS NOT NULL AS present,
         to_regclass($2) IS NOT NULL AS jobs,
         ARRAY(SELECT attname::text FROM pg_attribute
                WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped) AS columns,
         ARRAY(SELECT attname::text FROM pg_attribute
                WHERE attrelid = to_regclass($2) AND attnum > 0 AND NOT attisdropped) AS job_columns`;

/** The caller's own lease: its key, its owner token, still in flight. */
const owned = `scope = $1 AND idempotency_key = $2 AND owner_token = $3 AND status = 'in_flight'`;
// Comparisons: one instant per statement. Writes: the moment the row is written.
const at = 'statement_timestamp()';
const written = 'clock_timestamp()';
// The claim's bound on the expiry: its statement's start, so never later than the
// expiry written in the same statement or by the completion after it.
const purgeAfter = `${at} + $6::float8 * interval '1 second'`;
// Past its TTL and not running. An unfinished operation in phases never expires here: it
// is resumed by the same request, or marked abandoned by the reaper (docs/design/contract.md#operations-in-phases).
const expired =
  `r.expires_at <= ${at} AND (r.status = 'completed' OR (r.operation IS NULL ` +
  `AND (r.status <> 'in_flight' OR r.locked_until <= ${at})))`;

/** A record whose handler never started: deleted when it was new, else kept as released. */
const forgettingSql = (t: string): string => `
        WITH forgotten AS (
          DELETE FROM ${t} WHERE ${owned} AND attempts = 1 RETURNING 1
        ), kept AS (
          UPDATE ${t} SET status = 'released', locked_until = NULL, updated_at = ${written}
           WHERE ${owned} AND attempts > 1 RETURNING 1
        )`;

/**
 * The fast path of a first execution: a key nobody holds is one plain insert, without the
 * claim's CTE (its lookup, its outcome and its upsert cost PostgreSQL more on every new key).
 * A key that exists inserts nothing and returns no row: then the claim runs.
 */
const claimFreshSql = (t: string): string => `
        INSERT INTO ${t} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
          locked_until, expires_at, purge_after, attempts, method, path, created_at, updated_at)
        VALUES ($1, $2, $7, $3, 'in_flight', $4, ${written} + $5::float8 * interval '1 second',
          ${written} + $6::float8 * interval '1 second', ${purgeAfter}, 1, $8, $9, ${written},
          ${written})
        ON CONFLICT (scope, idempotency_key) DO NOTHING
        RETURNING record_id, attempts`;

/**
 * The claim of a key that has a record. The snapshot's row answers most calls without writing:
 * a replay, a mismatch or a live lease is read, not locked, so the statement takes no
 * transaction id and no WAL flush. Only a new, expired, released or lapsed key reaches the
 * INSERT, whose ON CONFLICT re-checks the row's latest version, so of concurrent callers
 * exactly one wins.
 */
const claimSql = (t: string): string => `
        WITH existing AS (
          SELECT CASE
                   WHEN ${expired} THEN 'retry'
                   WHEN r.fingerprint <> $3 THEN 'mismatch'
                   WHEN r.status = 'completed' THEN 'completed'
                   WHEN r.status = 'abandoned' THEN 'abandoned'
                   WHEN r.status = 'in_flight' AND r.locked_until > ${at} THEN 'in_flight'
                   ELSE 'retry'
                 END AS outcome,
                 r.record_id, r.attempts, r.response_status, r.response_headers, r.response_body,
                 EXTRACT(EPOCH FROM r.expires_at - ${at})::float8 * 1000 AS expires_in_ms
            FROM ${t} r
           WHERE r.scope = $1 AND r.idempotency_key = $2
        ), claimed AS (
          INSERT INTO ${t} AS r (scope, idempotency_key, record_id, fingerprint, status, owner_token,
            locked_until, expires_at, purge_after, attempts, method, path, created_at, updated_at)
          SELECT $1::text, $2::varchar, $7::uuid, $3::char(64), 'in_flight', $4::uuid,
                 ${written} + $5::float8 * interval '1 second',
                 ${written} + $6::float8 * interval '1 second', ${purgeAfter},
                 1, $8::varchar, $9::text, ${written}, ${written}
           WHERE NOT EXISTS (SELECT 1 FROM existing WHERE outcome <> 'retry')
          ON CONFLICT (scope, idempotency_key) DO UPDATE SET
            record_id = CASE WHEN ${expired} THEN md5(r.record_id::text)::uuid ELSE r.record_id END,
            attempts = CASE WHEN ${expired} THEN 1 ELSE r.attempts + 1 END,
            created_at = CASE WHEN ${expired} THEN ${written} ELSE r.created_at END,
            fingerprint = EXCLUDED.fingerprint,
            status = 'in_flight',
            owner_token = EXCLUDED.owner_token,
            -- Not EXCLUDED's times: those were computed before this update waited for the
            -- row lock (behind a transactional completion, say), and the lease would be short.
            locked_until = ${written} + $5::float8 * interval '1 second',
            expires_at = ${written} + $6::float8 * interval '1 second',
            -- A new record starts its own; a retry of the same one keeps the earlier bound.
            purge_after = CASE WHEN ${expired} THEN ${purgeAfter} ELSE r.purge_after END,
            method = EXCLUDED.method,
            path = EXCLUDED.path,
            response_status = NULL,
            response_headers = NULL,
            response_body = NULL,
            operation = CASE WHEN ${expired} THEN NULL ELSE r.operation END,
            recovery_point = CASE WHEN ${expired} THEN NULL ELSE r.recovery_point END,
            operation_input = CASE WHEN ${expired} THEN NULL ELSE r.operation_input END,
            operation_state = CASE WHEN ${expired} THEN NULL ELSE r.operation_state END,
            operation_settings = CASE WHEN ${expired} THEN NULL ELSE r.operation_settings END,
            updated_at = ${written}
          WHERE (${expired})
             OR (r.fingerprint = EXCLUDED.fingerprint
                 AND (r.status = 'released' OR (r.status = 'in_flight' AND r.locked_until <= ${at})))
          RETURNING r.record_id, r.attempts
        )
        SELECT 'claimed' AS outcome, c.record_id, c.attempts,
               NULL::smallint AS response_status, NULL::jsonb AS response_headers,
               NULL::bytea AS response_body, NULL::float8 AS expires_in_ms
          FROM claimed c
        UNION ALL
        SELECT e.outcome, e.record_id, e.attempts, e.response_status, e.response_headers,
               e.response_body, e.expires_in_ms
          FROM existing e
         WHERE NOT EXISTS (SELECT 1 FROM claimed)`;

/** What a completion writes: the response, the record's expiry, no lease. */
const completedSet = `status = 'completed', response_status = $4, response_headers = $5,
               response_body = $6, expires_at = ${written} + $7::float8 * interval '1 second',
               purge_after = LEAST(purge_after, ${written} + $7::float8 * interval '1 second'),
               locked_until = NULL, updated_at = ${written}`;

/** The writes of the lease's owner: complete, renew, and release for a retry or for good. */
const ownerWriteSql = (t: string) => ({
  // No indexed column changes (purge_after only if a shorter TTL brought the expiry
  // before it), so on the table's spare page room this is a HOT update: the row's new
  // version goes on the same page and no index gets a new entry.
  complete: `UPDATE ${t} SET ${completedSet} WHERE ${owned} AND operation IS NULL`,
  // A completion sent again after its connection failed (TypeOrmIdempotencyStore.complete):
  // the first may have committed, so a record this owner already completed with the same
  // response is written again, identically. Being a write, its commit waits for a
  // synchronous standby like the first one's: once it returns, the completion is replicated.
  completeAgain: `
        UPDATE ${t} SET ${completedSet}
         WHERE scope = $1 AND idempotency_key = $2 AND owner_token = $3 AND operation IS NULL
           AND (status = 'in_flight' OR (status = 'completed' AND response_status = $4
                AND response_headers = $5 AND response_body IS NOT DISTINCT FROM $6))`,
  renew: `
        UPDATE ${t} SET locked_until = ${written} + $4::float8 * interval '1 second',
               updated_at = ${written}
         WHERE ${owned}`,
  releaseRetry: `
        UPDATE ${t} SET status = 'released', locked_until = NULL, updated_at = ${written}
         WHERE ${owned}`,
  // A request rejected before its handler started leaves nothing behind, unless an earlier
  // attempt of the same key did run its handler: then the key stays released.
  releaseForget: `${forgettingSql(t)}
        SELECT (SELECT count(*) FROM forgotten) + (SELECT count(*) FROM kept) AS n`,
});

/**
 * One batch of the purge. Oldest expiry first, from where the pass has got to ($2): the index
 * scan starts there rather than walking over the entries of every row the pass already
 * deleted. Through the index on purge_after (never later than expires_at); the rows it finds
 * that a completion gave a later expiry are left for a later pass.
 */
const purgeSql = (t: string): string => `
        WITH gone AS (
          DELETE FROM ${t} WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM ${t} r
             WHERE r.purge_after <= ${at} AND r.expires_at <= ${at}
               AND NOT (r.status = 'in_flight' AND r.locked_until > ${at})
               AND (r.operation IS NULL OR r.status = 'completed')
               AND r.purge_after >= coalesce($2::timestamptz, '-infinity')
             ORDER BY r.purge_after
             LIMIT $1 FOR UPDATE SKIP LOCKED))
          RETURNING purge_after
        )
        SELECT count(*)::int AS deleted, max(purge_after)::text AS last FROM gone`;

/**
 * The text of every statement `TypeOrmIdempotencyStore` sends, by name.
 * @param tableName - the record table, as configured (quoted here)
 */
export function recordStatements(tableName: string) {
  const t = quoteTableName(tableName);
  const channel = wakeUpChannelOf(tableName);
  const sql = {
    claimFresh: claimFreshSql(t),
    claim: claimSql(t),
    ...ownerWriteSql(t),
    purge: purgeSql(t),
    verify: RECORD_TABLE_CHECK_SQL,
    health: healthSql(tableName),
  };
  // A write of a route that may wait (`ref.announce`) tells the listening instances in the same
  // statement, only when it changed the record: one more statement text, no more round trip.
  // Inside a transaction the notification is sent at its commit.
  return {
    ...sql,
    completeAnnounced: announcedWrite(sql.complete, channel, '$8'),
    completeAgainAnnounced: announcedWrite(sql.completeAgain, channel, '$8'),
    // A transaction's completion sent with its COMMIT: it fails unless it completed the
    // record, so the COMMIT behind it rolls back (TypeOrmStoreTransaction.commitWith).
    completeOrFail: `WITH written AS (${sql.complete} RETURNING 1)
        SELECT ${failUnlessWritten('count(*)::int')} AS n FROM written`,
    completeAnnouncedOrFail: `WITH written AS (${sql.complete} RETURNING 1)
        ${notifyWritten(channel, '$8', failUnlessWritten)}`,
    releaseRetryAnnounced: announcedWrite(sql.releaseRetry, channel, '$4'),
    releaseForgetAnnounced: `${forgettingSql(t)}, written AS (
          SELECT 1 FROM forgotten UNION ALL SELECT 1 FROM kept
        ) ${notifyWritten(channel, '$4')}`,
  };
}

/** The name of one of the record table's statements. */
export type RecordStatementName = keyof ReturnType<typeof recordStatements>;
