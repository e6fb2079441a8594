import { createHash } from 'node:crypto';
import type { ChaosDatabase } from './chaos-database';

/** An idempotency record as the checks need it. */
export interface RecordRow {
  scope: string;
  idempotency_key: string;
  record_id: string;
  status: 'in_flight' | 'completed' | 'released';
  attempts: number;
  lease_live: boolean | null;
  response_status: number | null;
  response_body: Buffer | null;
  path: string;
}

/** What the sample app and its fake provider left in the scenario's database. */
export interface DatabaseSnapshot {
  records: RecordRow[];
  payments: { id: string; account_id: string; description: string | null; charge_id: string }[];
  charges: { id: string; idempotency_key: string; customer_id: string }[];
  /** Provider calls per provider key (each handler run that reached the provider). */
  calls: Map<string, number>;
  refunds: { id: string; payment_id: string }[];
}

/**
 * The key the sample app gives the provider for a record: mirrors
 * `IdempotencyContext.derivedKey('charge')` (SHA-256 of the record id and the label), so each
 * provider charge can be traced back to the idempotency record that asked for it.
 */
export function chargeKeyOf(recordId: string): string {
  return createHash('sha256').update(`${recordId}\u0000charge`).digest('hex');
}

/** Reads every row the checks look at. The scenario's database holds nothing else. */
export async function readSnapshot(db: ChaosDatabase): Promise<DatabaseSnapshot> {
  const [records, payments, charges, calls, refunds] = await Promise.all([
    db.query<RecordRow>(
      `SELECT scope, idempotency_key, record_id, status, attempts,
              locked_until > now() AS lease_live, response_status, response_body, path
         FROM idempotency_records`,
    ),
    // Succeeded payments: the first step writes one `pending`, a decline leaves it `failed`.
    db.query(
      "SELECT id, account_id, description, charge_id FROM payments WHERE status = 'succeeded'",
    ),
    db.query('SELECT id, idempotency_key, customer_id FROM provider_charges'),
    db.query<{ idempotency_key: string; calls: number }>(
      'SELECT idempotency_key, calls FROM provider_calls',
    ),
    db.query('SELECT id, payment_id FROM refunds'),
  ]);
  return {
    records,
    payments,
    charges,
    calls: new Map(calls.map((row) => [row.idempotency_key, Number(row.calls)])),
    refunds,
  };
}

/**
 * Waits until no record holds a live lease (every handler finished or its lease lapsed).
 * @returns how many records still hold a live lease when `timeoutMs` ran out
 */
export async function waitForLeasesToLapse(db: ChaosDatabase, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [{ live }] = await db.query<{ live: number }>(
      `SELECT count(*)::int AS live FROM idempotency_records
        WHERE status = 'in_flight' AND locked_until > now()`,
    );
    if (live === 0 || Date.now() > deadline) return live;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
