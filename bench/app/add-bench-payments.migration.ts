import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * For the phased bench routes: a payment status and charge id on `bench_entries` (null on the
 * rows the other routes insert), and `bench_provider_charges`, the fake provider's own table,
 * one row per idempotency key it was given.
 */
export class AddBenchPayments1764720000000 implements MigrationInterface {
  /** @inheritDoc */
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      ALTER TABLE bench_entries
        ADD COLUMN IF NOT EXISTS status text,
        ADD COLUMN IF NOT EXISTS charge_id text`);
    await runner.query(`
      CREATE TABLE IF NOT EXISTS bench_provider_charges (
        idempotency_key text PRIMARY KEY,
        charge_id text NOT NULL,
        amount integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /** @inheritDoc */
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE bench_provider_charges');
    await runner.query('ALTER TABLE bench_entries DROP COLUMN charge_id, DROP COLUMN status');
  }
}
