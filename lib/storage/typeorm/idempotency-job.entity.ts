import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  Index,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

/**
 * The staged-jobs table of the default record table (`idempotency_records_jobs`, docs/design/contract.md#operations-in-phases) as a
 * TypeORM entity. The library needs it as much as the record table: list it next to
 * `IdempotencyRecordEntity` when `synchronize` makes the schema (development), or the module
 * refuses to start and says the jobs table is missing. Production schemas should come from the
 * shipped migration.
 *
 * Like `IdempotencyRecordEntity`, it describes exactly the table the shipped migration creates,
 * with the migration's names, so `synchronize` and `migration:generate` find nothing to change
 * (a test compares the two).
 */
@Entity({ name: 'idempotency_records_jobs' })
@Index('idempotency_records_jobs_due_idx', ['runAfter', 'id'], { where: `"status" = 'pending'` })
@Check('idempotency_records_jobs_status_check', `"status" IN ('pending', 'dead')`)
export class IdempotencyJobEntity {
  /** Order of staging. */
  @PrimaryGeneratedColumn({
    type: 'bigint',
    primaryKeyConstraintName: 'idempotency_records_jobs_pkey',
  })
  id!: string;

  /** The job handler's name. */
  @Column({ type: 'varchar', length: 200 })
  name!: string;

  /** The handler's arguments. */
  @Column({ type: 'jsonb' })
  args!: unknown;

  /** Derived from the record and the step, so a job is staged once per step. */
  @Column({ name: 'job_key', type: 'char', length: 64 })
  jobKey!: string;

  /** Scope of the record that staged it. */
  @Column({ name: 'origin_scope', type: 'text' })
  originScope!: string;

  /** Idempotency-Key of the record that staged it. */
  @Column({ name: 'origin_key', type: 'varchar', length: 255 })
  originKey!: string;

  /** `pending` until it ran, `dead` when its attempts ran out. */
  @Column({ type: 'varchar', length: 16, default: 'pending' })
  status!: 'pending' | 'dead';

  /** How many times it was tried. */
  @Column({ type: 'integer', default: 0 })
  attempts!: number;

  /** Not run before (the database clock). */
  @Column({ name: 'run_after', type: 'timestamptz', default: () => 'now()' })
  runAfter!: Date;

  /** The last failure's message. */
  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError!: string | null;

  /** When it was staged. */
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  /** Last write. */
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
