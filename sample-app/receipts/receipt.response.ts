import type { ReceiptEntity } from './receipt.entity';

/** A receipt as the API shows it. */
export interface ReceiptResponse {
  id: string;
  paymentId: string;
  amount: number;
  currency: string;
  createdAt: string;
}

/** Maps a stored receipt to its API shape. */
export function toReceiptResponse(receipt: ReceiptEntity): ReceiptResponse {
  return {
    id: receipt.id,
    paymentId: receipt.paymentId,
    amount: receipt.amount,
    currency: receipt.currency,
    createdAt: receipt.createdAt.toISOString(),
  };
}
