import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The tables of the floor and peer cases: `bench_lean_records` (the lean floor: the record's
 * columns, `fillfactor = 60` so a completion can stay on its page, and no index on the columns
 * a completion changes) and `bench_durable_keys` (the blog-style durable peer's entity).
 */
export class AddBenchFloor1764806400000 implements MigrationInterface {
  /** @inheritDoc */
  async up(runner: QueryRunner): Promise<void> {
    await runner.query(`
      CREATE TABLE IF NOT EXISTS bench_lean_records (
        scope text NOT NULL,
        idempotency_key varchar(255) NOT NULL,
        fingerprint char(64) NOT NULL,
        status varchar(16) NOT NULL,
        owner_token uuid,
        locked_until timestamptz,
        expires_at timestamptz NOT NULL,
        response_status smallint,
        response_headers jsonb,
        response_body bytea,
        PRIMARY KEY (scope, idempotency_key)
      ) WITH (fillfactor = 60)`);
    await runner.query(
      'CREATE INDEX IF NOT EXISTS bench_lean_records_expires_idx ON bench_lean_records (expires_at)',
    );
    await runner.query(`
      CREATE TABLE IF NOT EXISTS bench_durable_keys (
        key varchar(255) PRIMARY KEY,
        request_hash char(64) NOT NULL,
        status varchar(16) NOT NULL,
        response_status integer,
        response_body jsonb,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  /** @inheritDoc */
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE bench_durable_keys');
    await runner.query('DROP TABLE bench_lean_records');
  }
}
