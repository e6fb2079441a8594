import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

/** The receipt of a succeeded payment, written by the staged `send_receipt` job. */
@Entity({ name: 'receipts' })
export class ReceiptEntity {
  /** `rcpt_…` */
  @PrimaryColumn({ type: 'text' })
  id!: string;

  @Column({ name: 'payment_id', type: 'text' })
  paymentId!: string;

  /** The staged job's key: the receipt is written once per job, however often it is delivered. */
  @Column({ name: 'job_key', type: 'char', length: 64 })
  jobKey!: string;

  @Column({ type: 'integer' })
  amount!: number;

  @Column({ type: 'text' })
  currency!: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;
}
