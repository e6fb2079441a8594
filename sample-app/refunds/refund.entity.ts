import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/** A (partial) refund of a payment. */
@Entity({ name: 'refunds' })
export class RefundEntity {
  /** `re_…` */
  @PrimaryColumn({ type: 'text' })
  id!: string;

  @Column({ name: 'payment_id', type: 'text' })
  paymentId!: string;

  /** Minor units; the refunds of a payment never add up to more than its amount. */
  @Column({ type: 'integer' })
  amount!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
