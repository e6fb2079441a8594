/** Stable codes of the errors the library answers with. */
export type IdempotencyErrorCode =
  | 'idempotency_key_missing'
  | 'idempotency_key_invalid'
  | 'idempotency_key_reused'
  | 'idempotency_key_in_use'
  | 'idempotency_store_unavailable'
  | 'idempotency_body_unreadable'
  | 'idempotency_scope_invalid'
  | 'idempotency_scope_missing'
  | 'idempotency_transaction_unavailable'
  | 'idempotency_retry_later'
  | 'idempotency_operation_abandoned'
  | 'idempotency_operation_unavailable'
  | 'idempotency_operation_input_invalid'
  | 'idempotency_record_unreadable'
  | 'idempotency_request_too_large'
  | 'idempotency_response_not_stored'
  | 'idempotency_webhook_signature_invalid';

/** The HTTP status and title of each code. */
export const PROBLEMS: Record<IdempotencyErrorCode, { status: number; title: string }> = {
  idempotency_key_missing: { status: 400, title: 'Idempotency-Key is missing' },
  idempotency_key_invalid: { status: 400, title: 'Idempotency-Key is invalid' },
  idempotency_key_reused: { status: 422, title: 'Idempotency-Key is already used' },
  idempotency_key_in_use: {
    status: 409,
    title: 'A request is outstanding for this Idempotency-Key',
  },
  idempotency_store_unavailable: { status: 503, title: 'Idempotency store is unavailable' },
  idempotency_body_unreadable: { status: 415, title: 'Request body cannot be compared' },
  idempotency_scope_invalid: { status: 500, title: 'Idempotency scope is misconfigured' },
  idempotency_scope_missing: { status: 400, title: 'The caller of this request is not identified' },
  idempotency_transaction_unavailable: {
    status: 500,
    title: 'Idempotency transaction is unavailable',
  },
  idempotency_retry_later: { status: 503, title: 'The operation will be retried' },
  idempotency_operation_abandoned: {
    status: 409,
    title: 'The operation for this Idempotency-Key was abandoned',
  },
  idempotency_operation_unavailable: {
    status: 500,
    title: 'Idempotency operation is misconfigured',
  },
  idempotency_operation_input_invalid: {
    status: 400,
    title: 'The operation input cannot be stored',
  },
  idempotency_record_unreadable: { status: 500, title: 'Idempotency record cannot be read' },
  idempotency_request_too_large: {
    status: 413,
    title: 'Request body is too large for an Idempotency-Key',
  },
  idempotency_response_not_stored: {
    status: 409,
    title: 'The response for this Idempotency-Key was not stored',
  },
  idempotency_webhook_signature_invalid: { status: 400, title: 'Webhook signature is invalid' },
};
