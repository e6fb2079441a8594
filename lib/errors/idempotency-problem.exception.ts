import { HttpException, HttpStatus } from '@nestjs/common';
import { PROBLEM_CONTENT_TYPE } from '../idempotency.constants';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';

/** Stable codes of the errors the library answers with (SPEC §9). */
export type IdempotencyErrorCode =
  | 'idempotency_key_missing'
  | 'idempotency_key_invalid'
  | 'idempotency_key_reused'
  | 'idempotency_key_in_use'
  | 'idempotency_store_unavailable';

const PROBLEMS: Record<IdempotencyErrorCode, { status: number; title: string }> = {
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
};

/** An RFC 9457 problem document as the library sends it. */
export interface IdempotencyProblem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: IdempotencyErrorCode;
}

/**
 * An error the library answers a request with. Rendered as `application/problem+json` with
 * `Cache-Control: no-store` (and `Retry-After` where set) by `IdempotencyExceptionFilter`,
 * which `@Idempotent()` binds to the route.
 */
export class IdempotencyProblemException extends HttpException {
  /**
   * @param code - stable error code
   * @param detail - human-readable explanation; never contains the raw key
   * @param retryAfterSeconds - sent as `Retry-After` when set
   */
  constructor(
    readonly code: IdempotencyErrorCode,
    readonly detail: string,
    readonly retryAfterSeconds?: number,
  ) {
    super({ code, title: PROBLEMS[code].title, detail }, PROBLEMS[code].status);
  }

  /**
   * Builds the problem document.
   * @param typeBaseUri - the module's `problemTypeBaseUri`
   */
  toProblem(typeBaseUri: string): IdempotencyProblem {
    return {
      type: `${typeBaseUri}${this.code}`,
      title: PROBLEMS[this.code].title,
      status: this.getStatus(),
      detail: this.detail,
      code: this.code,
    };
  }

  /**
   * The whole response: status, problem+json headers (`Cache-Control: no-store`, `Retry-After`
   * where set) and the body bytes.
   * @param typeBaseUri - the module's `problemTypeBaseUri`
   */
  toResponse(typeBaseUri: string): StoredResponse {
    const headers: Record<string, string> = {
      'content-type': PROBLEM_CONTENT_TYPE,
      'cache-control': 'no-store',
    };
    if (this.retryAfterSeconds !== undefined)
      headers['retry-after'] = String(this.retryAfterSeconds);
    return {
      status: this.getStatus(),
      headers,
      body: Buffer.from(JSON.stringify(this.toProblem(typeBaseUri)), 'utf8'),
    };
  }
}
