import type { IdempotencyErrorCode } from './idempotency-error-codes';

/**
 * What an application's `errorBody` option returns for one of the library's errors: the body
 * (an object or array is sent as JSON, a string as text, a Buffer as bytes) and, optionally, its
 * content type (`application/json; charset=utf-8` for objects by default).
 */
export interface IdempotencyErrorBody {
  /** The body to send: an object or array as JSON, a string as text, a Buffer as bytes. */
  body: unknown;
  /** Its content type, when the default for the body's kind is not the one wanted. */
  contentType?: string;
}

/**
 * Shapes the body of the library's errors for an API that has its own error format (Stripe's
 * `{ error: { type, code, message } }`, say). Given the problem the library would send; the
 * status, `Retry-After` and `Cache-Control: no-store` stay as they are. Keep `problem.code` in
 * the body: it is the stable code clients branch on.
 */
export type IdempotencyErrorBodyRenderer = (problem: IdempotencyProblem) => IdempotencyErrorBody;

/** An RFC 9457 problem document as the library sends it. */
export interface IdempotencyProblem {
  /** URI of the problem type: `problemTypeBaseUri` followed by the code. */
  type: string;
  /** Short summary of the code (it may name the route's key header). */
  title: string;
  /** The HTTP status. */
  status: number;
  /** What went wrong with this request; never contains the raw key. */
  detail: string;
  /** The stable code clients branch on. */
  code: IdempotencyErrorCode;
  /**
   * The status the operation completed with, on `idempotency_response_not_stored`: the request
   * was carried out, only its body is not replayed.
   */
  completedStatus?: number;
}

/**
 * Where a key is, as refusals name it: the route's key header (`Idempotency-Key`), or, for a
 * call that is not an HTTP request, what it is and where it keeps its key (`message`, `the
 * "idempotencyKey" field`).
 * @inline
 */
export type IdempotencyKeyPlace = string | { call: string; where: string };
