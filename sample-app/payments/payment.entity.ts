import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/**
 * A payment of one account, charged once through the provider. Written `pending` by the first
 * step of `CreatePaymentOperation`, then `succeeded` (with its charge) or `failed` (declined).
 */
@Entity({ name: 'payments' })
export class PaymentEntity {
  /** `pay_…` */
  @PrimaryColumn({ type: 'text' })
  id!: string;

  /** The `X-Account-Id` that created it (also the idempotency scope). */
  @Column({ name: 'account_id', type: 'text' })
  accountId!: string;

  /** Minor units (cents). */
  @Column({ type: 'integer' })
  amount!: number;

  @Column({ type: 'text' })
  currency!: string;

  @Column({ name: 'customer_id', type: 'text' })
  customerId!: string;

  @Column({ type: 'text', nullable: true })
  description!: string | null;

  @Column({ type: 'text' })
  status!: 'pending' | 'succeeded' | 'failed';

  /** The provider's charge (`ch_…`), once charged. */
  @Column({ name: 'charge_id', type: 'text', nullable: true })
  chargeId!: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
