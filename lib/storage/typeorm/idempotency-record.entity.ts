import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  Index,
  PrimaryColumn,
  UpdateDateColumn,
} from 'typeorm';
import type { IdempotencyRecordStatus } from '../../interfaces/idempotency-record.interface';

/**
 * The record table as a TypeORM entity (default `tableName` only), for applications that
 * want to read records or let `synchronize` create the table in development: list it with
 * `IdempotencyJobEntity`, its jobs table, which the library needs too. Production schemas
 * should come from the shipped migration.
 *
 * It describes exactly the table the shipped migration creates — columns, primary key, check
 * and indexes, with the migration's names — so `synchronize` and `migration:generate` in the
 * application find nothing to change (a test compares the two with TypeORM's schema diff).
 * Not its fillfactor (60), which TypeORM cannot express: a synchronized table has the default
 * 100, so a completion is less often a HOT update there, which is only slower.
 */
@Entity({ name: 'idempotency_records' })
@Index('idempotency_records_purge_after_idx', ['purgeAfter'])
@Index('idempotency_records_unfinished_idx', ['lastRunAt'], {
  where: `"operation" IS NOT NULL AND "recovery_point" <> 'finished'`,
})
@Check(
  'idempotency_records_status_check',
  `"status" IN ('in_flight', 'completed', 'released', 'abandoned')`,
)
export class IdempotencyRecordEntity {
  /** Caller identity the key belongs to (`''` when there is none). */
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'idempotency_records_pkey' })
  scope!: string;

  /** The Idempotency-Key, unquoted. */
  @PrimaryColumn({
    name: 'idempotency_key',
    type: 'varchar',
    length: 255,
    primaryKeyConstraintName: 'idempotency_records_pkey',
  })
  key!: string;

  /** Stable id, kept across releases and takeovers; the seed of derived keys. */
  @Column({ name: 'record_id', type: 'uuid' })
  recordId!: string;

  /** SHA-256 (hex) of the request. */
  @Column({ type: 'char', length: 64 })
  fingerprint!: string;

  /** `in_flight`, `completed`, `released` or `abandoned` (an operation left for a human). */
  @Column({ type: 'varchar', length: 16 })
  status!: IdempotencyRecordStatus;

  /** Token of the current owner; every write after the claim is guarded by it. */
  @Column({ name: 'owner_token', type: 'uuid', nullable: true })
  ownerToken!: string | null;

  /** End of the current lease (database clock). */
  @Column({ name: 'locked_until', type: 'timestamptz', nullable: true })
  lockedUntil!: Date | null;

  /** When the record stops being replayed and may be purged. */
  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt!: Date;

  /** How many times the key was claimed (1 + releases + takeovers). */
  @Column({ type: 'integer', default: 1 })
  attempts!: number;

  /** HTTP method of the request. */
  @Column({ type: 'varchar', length: 16 })
  method!: string;

  /** Request path with query. */
  @Column({ type: 'text' })
  path!: string;

  /** Stored response status, once completed. */
  @Column({ name: 'response_status', type: 'smallint', nullable: true })
  responseStatus!: number | null;

  /** Stored allow-listed response headers, once completed. */
  @Column({ name: 'response_headers', type: 'jsonb', nullable: true })
  responseHeaders!: Record<string, string | string[]> | null;

  /** Stored response body bytes, once completed. */
  @Column({ name: 'response_body', type: 'bytea', nullable: true })
  responseBody!: Buffer | null;

  /** When the key was first claimed. */
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  /** Last write. */
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;

  /** Name of the operation in phases this record runs (docs/design/contract.md#operations-in-phases); null for a plain route. */
  @Column({ type: 'varchar', length: 200, nullable: true })
  operation!: string | null;

  /** The operation's recovery point: `started`, a step's name, or `finished`. */
  @Column({ name: 'recovery_point', type: 'varchar', length: 200, nullable: true })
  recoveryPoint!: string | null;

  /** The operation's input, stored when it first ran so it can be resumed without the request. */
  @Column({ name: 'operation_input', type: 'jsonb', nullable: true })
  operationInput!: unknown;

  /** State carried from one step to the next. */
  @Column({ name: 'operation_state', type: 'jsonb', nullable: true })
  operationState!: Record<string, unknown> | null;

  /** When a request, a retry or the completer last ran the operation. */
  @Column({ name: 'last_run_at', type: 'timestamptz', nullable: true })
  lastRunAt!: Date | null;

  /**
   * The earliest the record can expire (the claim's time plus the TTL), indexed for the purge;
   * `expiresAt` is never earlier. The completion leaves it alone, so it writes no index entry.
   */
  @Column({ name: 'purge_after', type: 'timestamptz' })
  purgeAfter!: Date;

  /**
   * The settings of the route that started the operation in phases, which the background
   * completer answers with; null for a plain route.
   */
  @Column({ name: 'operation_settings', type: 'jsonb', nullable: true })
  operationSettings!: Record<string, unknown> | null;
}
