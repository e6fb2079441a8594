import { HttpStatus } from '@nestjs/common';

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

/** The status and title of each code. */
export const PROBLEMS: Record<IdempotencyErrorCode, { status: number; title: string }> = {
  idempotency_key_missing: {
    status: HttpStatus.BAD_REQUEST,
    title: 'Idempotency-Key is missing',
  },
  idempotency_key_invalid: {
    status: HttpStatus.BAD_REQUEST,
    title: 'Idempotency-Key is invalid',
  },
  idempotency_key_reused: {
    status: HttpStatus.UNPROCESSABLE_ENTITY,
    title: 'Idempotency-Key is already used',
  },
  idempotency_key_in_use: {
    status: HttpStatus.CONFLICT,
    title: 'A request is outstanding for this Idempotency-Key',
  },
  idempotency_store_unavailable: {
    status: HttpStatus.SERVICE_UNAVAILABLE,
    title: 'Idempotency store is unavailable',
  },
  idempotency_body_unreadable: {
    status: HttpStatus.UNSUPPORTED_MEDIA_TYPE,
    title: 'Request body cannot be compared',
  },
  idempotency_scope_invalid: {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    title: 'Idempotency scope is misconfigured',
  },
  idempotency_scope_missing: {
    status: HttpStatus.BAD_REQUEST,
    title: 'The caller of this request is not identified',
  },
  idempotency_transaction_unavailable: {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    title: 'Idempotency transaction is unavailable',
  },
  idempotency_retry_later: {
    status: HttpStatus.SERVICE_UNAVAILABLE,
    title: 'The operation will be retried',
  },
  idempotency_operation_abandoned: {
    status: HttpStatus.CONFLICT,
    title: 'The operation for this Idempotency-Key was abandoned',
  },
  idempotency_record_unreadable: {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    title: 'Idempotency record cannot be read',
  },
  idempotency_operation_input_invalid: {
    status: HttpStatus.BAD_REQUEST,
    title: 'The operation input cannot be stored',
  },
  idempotency_operation_unavailable: {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    title: 'Idempotency operation is misconfigured',
  },
  idempotency_request_too_large: {
    status: HttpStatus.PAYLOAD_TOO_LARGE,
    title: 'Request body is too large for an Idempotency-Key',
  },
  idempotency_response_not_stored: {
    status: HttpStatus.CONFLICT,
    title: 'The response for this Idempotency-Key was not stored',
  },
  idempotency_webhook_signature_invalid: {
    status: HttpStatus.BAD_REQUEST,
    title: 'Webhook signature is invalid',
  },
};
