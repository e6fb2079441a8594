import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What `POST /payments` in phases writes besides the payment: a payment is `pending` until it is
 * charged (so `charge_id` may be empty), an audit trail of its steps, and the receipts the
 * staged `send_receipt` job writes (one per payment, one per job key).
 */
export class AddPaymentPhases1764028800000 implements MigrationInterface {
  /** @inheritDoc */
  async up(runner: QueryRunner): Promise<void> {
    await runner.query('ALTER TABLE payments ALTER COLUMN charge_id DROP NOT NULL');
    await runner.query(`
      CREATE TABLE payment_audit (
        id serial PRIMARY KEY,
        payment_id text NOT NULL REFERENCES payments (id),
        event text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query('CREATE INDEX payment_audit_payment ON payment_audit (payment_id)');
    await runner.query(`
      CREATE TABLE receipts (
        id text PRIMARY KEY,
        payment_id text NOT NULL UNIQUE REFERENCES payments (id),
        job_key char(64) NOT NULL UNIQUE,
        amount integer NOT NULL,
        currency text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /** @inheritDoc */
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE receipts');
    await runner.query('DROP TABLE payment_audit');
    await runner.query('ALTER TABLE payments ALTER COLUMN charge_id SET NOT NULL');
  }
}
