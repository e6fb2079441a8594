import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/** The blog-style peer's record: one row per key (table made by `AddBenchFloor`). */
@Entity({ name: 'bench_durable_keys' })
export class DurableKeyEntity {
  @PrimaryColumn({ type: 'varchar', length: 255 })
  key!: string;

  @Column({ name: 'request_hash', type: 'char', length: 64 })
  requestHash!: string;

  /** `processing` or `completed`. */
  @Column({ type: 'varchar', length: 16 })
  status!: string;

  @Column({ name: 'response_status', type: 'integer', nullable: true })
  responseStatus!: number | null;

  @Column({ name: 'response_body', type: 'jsonb', nullable: true })
  responseBody!: unknown;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
