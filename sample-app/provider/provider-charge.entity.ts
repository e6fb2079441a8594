import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/** A charge made by the fake payment provider. One per idempotency key it was given. */
@Entity({ name: 'provider_charges' })
export class ProviderChargeEntity {
  /** `ch_…` */
  @PrimaryColumn({ type: 'text' })
  id!: string;

  /** The key the caller gave; a second call with it returns this charge. */
  @Column({ name: 'idempotency_key', type: 'text', unique: true })
  idempotencyKey!: string;

  @Column({ name: 'customer_id', type: 'text' })
  customerId!: string;

  @Column({ type: 'integer' })
  amount!: number;

  @Column({ type: 'text' })
  currency!: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
