import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Creates `bench_entries`, the table the bench handler inserts into. */
export class CreateBenchEntries1764547200000 implements MigrationInterface {
  /** @inheritDoc */
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE IF NOT EXISTS bench_entries (
        id serial PRIMARY KEY,
        amount integer NOT NULL,
        note text,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /** @inheritDoc */
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE bench_entries');
  }
}
