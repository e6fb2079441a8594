import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Creates the sample app's own tables: payments and refunds. */
export class CreatePayments1763769600000 implements MigrationInterface {
  /** @inheritDoc */
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE payments (
        id text PRIMARY KEY,
        account_id text NOT NULL,
        amount integer NOT NULL CHECK (amount > 0),
        currency text NOT NULL,
        customer_id text NOT NULL,
        description text,
        status text NOT NULL,
        charge_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query(
      'CREATE INDEX payments_account_created ON payments (account_id, created_at)',
    );
    await runner.query(`
      CREATE TABLE refunds (
        id text PRIMARY KEY,
        payment_id text NOT NULL REFERENCES payments (id),
        amount integer NOT NULL CHECK (amount > 0),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await runner.query('CREATE INDEX refunds_payment ON refunds (payment_id)');
  }

  /** @inheritDoc */
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE refunds');
    await runner.query('DROP TABLE payments');
  }
}
