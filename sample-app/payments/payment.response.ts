import type { PaymentEntity } from './payment.entity';

/** A payment as the API shows it. */
export interface PaymentResponse {
  id: string;
  amount: number;
  currency: string;
  customerId: string;
  description: string | null;
  status: PaymentEntity['status'];
  chargeId: string | null;
  createdAt: string;
}

/** Maps a stored payment to its API shape (the account id stays internal). */
export function toPaymentResponse(payment: PaymentEntity): PaymentResponse {
  return {
    id: payment.id,
    amount: payment.amount,
    currency: payment.currency,
    customerId: payment.customerId,
    description: payment.description,
    status: payment.status,
    chargeId: payment.chargeId,
    createdAt: payment.createdAt.toISOString(),
  };
}
