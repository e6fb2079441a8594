import type { ClaimResult, StoredResponse } from '../../interfaces/idempotency-record.interface';
import type { StatementResult } from './prepared-statement';

// What the TypeORM store reads of its statements' rows (record-statements.sql.ts), and the
// values it writes of a response.

/** The values a completion writes: the response's status, headers and body, then its TTL. */
export function responseValues(response: StoredResponse, ttlSeconds: number): unknown[] {
  return [response.status, JSON.stringify(response.headers), response.body, ttlSeconds];
}

/** The claim of a new key, or `undefined` when the key has a record (then the claim runs). */
export function freshClaimOf(result: StatementResult): ClaimResult | undefined {
  const fresh = result.rows[0];
  return fresh && { outcome: 'claimed', recordId: fresh.record_id, attempt: 1 };
}

/** Whether a write changed the record: its row count, or `n` when it announced itself. */
export function writtenOf(result: StatementResult, announced: boolean): boolean {
  return announced ? Number(result.rows[0]?.n) === 1 : result.rowCount === 1;
}

/**
 * What the claim of a key that has a record found: taken over, completed, in flight, reused or
 * abandoned; `undefined` when a concurrent writer changed the row under it (then it runs again).
 */
export function claimOutcomeOf(row: any): ClaimResult | undefined {
  const recordId: string = row?.record_id;
  switch (row?.outcome) {
    case undefined:
    case 'retry':
      return undefined;
    case 'claimed':
      return { outcome: 'claimed', recordId, attempt: Number(row.attempts) };
    case 'completed':
      return {
        outcome: 'completed',
        recordId,
        response: {
          status: Number(row.response_status),
          headers: row.response_headers ?? {},
          body: row.response_body ?? Buffer.alloc(0),
        },
        expiresInMs: Number(row.expires_in_ms),
      };
    case 'mismatch':
    case 'abandoned':
      return { outcome: row.outcome, recordId };
    default:
      return { outcome: 'in_flight', recordId };
  }
}
