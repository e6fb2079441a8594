import { randomUUID } from 'node:crypto';
import { TypeOrmIdempotencyStore } from '../../lib/storage/typeorm';
import type { DataSource } from 'typeorm';

/** A named statement, as node-postgres takes it. */
export interface FloorStatement {
  name: string;
  text: string;
}

export const FLOOR_TTL_SECONDS = 86400;
export const FLOOR_LEASE_SECONDS = 60;
/** No fingerprint is computed: the floor pays for none. */
export const FLOOR_FINGERPRINT = 'f'.repeat(64);
export const FLOOR_HEADERS = JSON.stringify({ 'content-type': 'application/json; charset=utf-8' });

/**
 * The TypeORM store's own claim (for a new key) and completion, as it prepares them (their text
 * and name), for the floor cases to send by hand.
 * @throws Error at startup when the store keeps them elsewhere (not public API)
 */
export function storeStatements(
  dataSource: DataSource,
): Record<'claimFresh' | 'complete', FloorStatement> {
  const store = new TypeOrmIdempotencyStore(dataSource, 'idempotency_records');
  // Not public API: read at startup so a renamed field fails here, not as an empty query.
  const sql = (
    store as unknown as { sql?: Partial<Record<'claimFresh' | 'complete', FloorStatement>> }
  ).sql;
  if (!sql?.claimFresh?.text || !sql.complete?.text) {
    throw new Error(
      'bench floor cases: TypeOrmIdempotencyStore no longer keeps its statements in ' +
        '`sql.claimFresh` and `sql.complete`; point bench/app/floor-statements.ts at where they are now.',
    );
  }
  return { claimFresh: sql.claimFresh, complete: sql.complete };
}

/** A statement with its values, as node-postgres's `query()` takes it. */
export interface FloorQuery extends FloorStatement {
  values: unknown[];
}

/** The library's claim of a new key and its completion, with a floor case's values. */
export interface FloorQueries {
  /** The store's fresh insert for `key`, owned by `owner`, as `POST path` (fingerprint fixed by default). */
  claimFresh(key: string, owner: string, path: string, fingerprint?: string): FloorQuery;
  /** The completion of `key` with `entry` as its 201 JSON body. */
  complete(key: string, owner: string, entry: unknown): FloorQuery;
  /** The completion of `key` with the response as it went out (headers as stored JSON). */
  completeWith(
    key: string,
    owner: string,
    status: number,
    headers: string,
    body: Buffer,
  ): FloorQuery;
}

/**
 * The store's statements (see `storeStatements`) with the values every floor case sends: no
 * scope, the fixed fingerprint, lease and TTL.
 */
export function floorQueries(dataSource: DataSource): FloorQueries {
  const statements = storeStatements(dataSource);
  return {
    claimFresh: (key, owner, path, fingerprint = FLOOR_FINGERPRINT) =>
      queryOf(statements.claimFresh, [
        '',
        key,
        fingerprint,
        owner,
        FLOOR_LEASE_SECONDS,
        FLOOR_TTL_SECONDS,
        randomUUID(),
        'POST',
        path,
      ]),
    complete: (key, owner, entry) =>
      completeWith(key, owner, 201, FLOOR_HEADERS, Buffer.from(JSON.stringify(entry))),
    completeWith,
  };
  function completeWith(
    key: string,
    owner: string,
    status: number,
    headers: string,
    body: Buffer,
  ): FloorQuery {
    return queryOf(statements.complete, ['', key, owner, status, headers, body, FLOOR_TTL_SECONDS]);
  }
}

/**
 * A statement's call, sent the cheapest way, as the library's statement helper sends it: name
 * and text inherited from the statement, the values its own (pg copies every query config it is
 * given, in about half the time when one property is its own rather than three).
 */
function queryOf(statement: FloorStatement, values: unknown[]): FloorQuery {
  const query = Object.create(statement) as FloorQuery;
  query.values = values;
  return query;
}
