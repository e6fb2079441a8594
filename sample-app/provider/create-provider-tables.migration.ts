import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Creates the fake provider's tables: its charges, and how many times each key was called (so
 * the "fails once" customers can fail the first call only).
 */
export class CreateProviderTables1763769600001 implements MigrationInterface {
  /** @inheritDoc */
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE IF NOT EXISTS provider_charges (
        id text PRIMARY KEY,
        idempotency_key text NOT NULL UNIQUE,
        customer_id text NOT NULL,
        amount integer NOT NULL,
        currency text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query(
      'CREATE INDEX IF NOT EXISTS provider_charges_customer ON provider_charges (customer_id)',
    );
    await runner.query(`
      CREATE TABLE IF NOT EXISTS provider_calls (
        idempotency_key text PRIMARY KEY,
        calls integer NOT NULL
      )`);
  }

  /** @inheritDoc */
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE provider_calls');
    await runner.query('DROP TABLE provider_charges');
  }
}
