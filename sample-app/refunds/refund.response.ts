import type { RefundEntity } from './refund.entity';

/** A refund as the API shows it. */
export interface RefundResponse {
  id: string;
  paymentId: string;
  amount: number;
  createdAt: string;
}

/** Maps a stored refund to its API shape. */
export function toRefundResponse(refund: RefundEntity): RefundResponse {
  return {
    id: refund.id,
    paymentId: refund.paymentId,
    amount: refund.amount,
    createdAt: refund.createdAt.toISOString(),
  };
}
