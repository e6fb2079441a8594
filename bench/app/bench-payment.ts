import type { BenchEntryInput } from './bench-entry';

/** A bench entry written as a payment: pending, then succeeded with the provider's charge. */
export interface BenchPayment {
  id: number;
  amount: number;
  note: string | null;
  status: 'pending' | 'succeeded';
  chargeId: string | null;
  createdAt: string;
}

/** Input of the phased operation, stored on the record: the body and the provider latency. */
export interface BenchPaymentInput extends BenchEntryInput {
  providerLatencyMs: number;
}

/** Inserts the entry as a pending payment; `RETURNING id`. */
export const INSERT_PENDING_PAYMENT = `
  INSERT INTO bench_entries (amount, note, status) VALUES ($1, $2, 'pending')
  RETURNING id`;

/** Marks the payment succeeded with its charge; TypeORM answers an UPDATE as `[rows, count]`. */
export const MARK_PAYMENT_SUCCEEDED = `
  UPDATE bench_entries SET status = 'succeeded', charge_id = $2 WHERE id = $1
  RETURNING id, amount, note, status, charge_id AS "chargeId", created_at AS "createdAt"`;
