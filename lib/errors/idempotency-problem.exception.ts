import { HttpException } from '@nestjs/common';
import { PROBLEM_CONTENT_TYPE, RESERVED_HEADER_PREFIX } from '../config/idempotency.constants';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { responseBytes } from '../utils/response-bytes';
import { PROBLEMS } from './idempotency-error-codes';
import type { IdempotencyErrorCode } from './idempotency-error-codes';
import type {
  IdempotencyErrorBodyRenderer,
  IdempotencyKeyPlace,
  IdempotencyProblem,
} from './idempotency-problem.types';

/** The `message` Nest derives from this class's name, worked out once rather than per error. */
const MESSAGE = 'Idempotency Problem Exception';

/** Whether `Error.stackTraceLimit` may be lowered for a moment (not where `Error` is frozen). */
const STACK_LIMIT_WRITABLE =
  Object.getOwnPropertyDescriptor(Error, 'stackTraceLimit')?.writable === true;

/** The detail of each refusal whose wording does not depend on the request. */
const DETAILS = {
  storeUnavailable:
    'The request was not processed because its idempotency record could not be written. Retry with the same key.',
  notConfirmed:
    'The response was stored, but the database did not confirm it as durable. Retry with the same key.',
  notStored:
    'The response could not be stored, so its changes were rolled back. Retry with the same key.',
  leaseLost:
    'This request took longer than its lease and another attempt took it over; its changes ' +
    'were rolled back. Retry with the same key to get the final response.',
  retryLater:
    'The request could not be completed now; what it already did is kept. Retry with the ' +
    'same key and it resumes where it stopped.',
  operationAbandoned:
    'The operation started with this key did not finish in time to be resumed safely and was ' +
    'handed to an operator. Do not retry it with a new key before checking its outcome.',
  recordUnreadable:
    'What the server stored for this key cannot be read now, so it is neither replayed nor ' +
    'run again. Do not retry it with a new key before checking its outcome.',
  scopeInvalid:
    'The server could not tell which caller this request belongs to. Nothing was processed.',
  scopeMissing:
    'This request does not identify its caller, so its idempotency key cannot be kept apart ' +
    "from other callers' keys. Nothing was processed. Send it with the credentials this API " +
    'expects.',
  configuration:
    'The server could not process this request because of a configuration error. Its response ' +
    'was not stored.',
};

/**
 * An error the library answers a request with. Rendered as `application/problem+json` with
 * `Cache-Control: no-store` (and `Retry-After` where set) by `IdempotencyExceptionFilter`,
 * which `@Idempotent()` binds to the route. A 4xx is an answer to the client, not a fault, and
 * carries no stack trace: capturing one cost a same-key storm's 409 about a tenth of its CPU.
 */
export class IdempotencyProblemException extends HttpException {
  /**
   * @param code - stable error code
   * @param detail - human-readable explanation; never contains the raw key
   * @param retryAfterSeconds - sent as `Retry-After` when set
   * @param title - the code's title, or one that names the route's key header
   */
  constructor(
    readonly code: IdempotencyErrorCode,
    readonly detail: string,
    readonly retryAfterSeconds?: number,
    readonly title: string = PROBLEMS[code].title,
  ) {
    const { status } = PROBLEMS[code];
    const limit = Error.stackTraceLimit;
    const stackless = status < 500 && STACK_LIMIT_WRITABLE;
    if (stackless) Error.stackTraceLimit = 0;
    super({ code, title, detail }, status);
    if (stackless) Error.stackTraceLimit = limit;
  }

  /** Sets the `message` Nest would, without matching the class name on every error. @internal */
  override initMessage(): void {
    this.message = MESSAGE;
  }

  /** The completed response whose body was not kept (`idempotency_response_not_stored`). */
  completed?: StoredResponse;

  /**
   * No key on a route that requires one. The title names the route's header, so a client of an
   * API that configured `X-Request-Key` is not told to send `Idempotency-Key`; a call that is
   * not an HTTP request is told where its key goes.
   */
  static keyMissing(place: IdempotencyKeyPlace): IdempotencyProblemException {
    const [detail, title] =
      typeof place === 'string'
        ? [
            `This request needs an ${place} header: send a unique value (a UUID is a good choice) and reuse it when you retry.`,
            `${place} is missing`,
          ]
        : [
            `This ${place.call} needs a key in ${place.where}: a unique value, the same on every retry of the ${place.call}.`,
            `The ${place.call} has no idempotency key`,
          ];
    return new IdempotencyProblemException('idempotency_key_missing', detail, undefined, title);
  }

  /** A key that is not 1–255 printable ASCII characters, bare or quoted; titled by its place. */
  static keyInvalid(place: IdempotencyKeyPlace, reason: string): IdempotencyProblemException {
    const [detail, title] =
      typeof place === 'string'
        ? [
            `The ${place} header is invalid: ${reason}. Send 1 to 255 printable ASCII characters, bare or as a quoted string.`,
            `${place} is invalid`,
          ]
        : [
            `The key in ${place.where} is invalid: ${reason}. Send 1 to 255 printable ASCII characters.`,
            `The ${place.call} has an invalid idempotency key`,
          ];
    return new IdempotencyProblemException('idempotency_key_invalid', detail, undefined, title);
  }

  /** The key was used before with another request (another payload, path or method). */
  static keyReused(place: IdempotencyKeyPlace): IdempotencyProblemException {
    const [detail, title] =
      typeof place === 'string'
        ? [
            `This ${place} was already used with a different request. Use a new key for a new request.`,
          ]
        : [
            `The key in ${place.where} was already used with other data. Use a new key for a new ${place.call}.`,
            'The idempotency key is already used',
          ];
    return new IdempotencyProblemException('idempotency_key_reused', detail, undefined, title);
  }

  /** The same request is still being processed. */
  static keyInUse(place: IdempotencyKeyPlace, retryAfter: number): IdempotencyProblemException {
    const [detail, title] =
      typeof place === 'string'
        ? [`A request with this ${place} is still being processed. Retry after it finishes.`]
        : [
            `A ${place.call} with the key in ${place.where} is still being processed. Retry after it finishes.`,
            `A ${place.call} is outstanding for this idempotency key`,
          ];
    return new IdempotencyProblemException('idempotency_key_in_use', detail, retryAfter, title);
  }

  /** The record could not be claimed (or the transaction opened): nothing ran. */
  static storeUnavailable(retryAfterSeconds: number): IdempotencyProblemException {
    return new this('idempotency_store_unavailable', DETAILS.storeUnavailable, retryAfterSeconds);
  }

  /**
   * The response was stored, but the database did not confirm the commit (a synchronous standby
   * that stalled): it is no final answer yet, and the retry replays it or runs once.
   */
  static notConfirmed(retryAfterSeconds: number): IdempotencyProblemException {
    return new this('idempotency_store_unavailable', DETAILS.notConfirmed, retryAfterSeconds);
  }

  /** A transactional handler ran but its completion could not be stored: all rolled back. */
  static notStored(retryAfterSeconds: number): IdempotencyProblemException {
    return new this('idempotency_store_unavailable', DETAILS.notStored, retryAfterSeconds);
  }

  /** A transactional handler outlived its lease and was taken over: its writes rolled back. */
  static leaseLost(retryAfterSeconds: number): IdempotencyProblemException {
    return new this('idempotency_key_in_use', DETAILS.leaseLost, retryAfterSeconds);
  }

  /** A step of an operation in phases asked to be retried later: the key was released. */
  static retryLater(retryAfterSeconds: number): IdempotencyProblemException {
    return new this('idempotency_retry_later', DETAILS.retryLater, retryAfterSeconds);
  }

  /** An unfinished operation was too old to resume and is left for a human. */
  static operationAbandoned(): IdempotencyProblemException {
    return new this('idempotency_operation_abandoned', DETAILS.operationAbandoned);
  }

  /** An operation could not run as declared (not registered, wrong route, no TypeORM store). */
  static operationUnavailable(detail: string): IdempotencyProblemException {
    return new this('idempotency_operation_unavailable', detail);
  }

  /**
   * An operation's input cannot be stored as given (PostgreSQL's JSON refuses a `\u0000` in a
   * string); nothing ran, and the same input gets the same answer.
   * @param detail - what is wrong with it, without echoing it
   */
  static operationInputInvalid(detail: string): IdempotencyProblemException {
    return new this('idempotency_operation_input_invalid', detail);
  }

  /**
   * What is stored under this key is sealed (`encryption`) with a key that is not configured, or
   * does not open with it: it is neither replayed nor run again.
   * @param developerMessage - which key id, and how to fix it; becomes the exception's `message`
   *   (for logs), never part of the response
   */
  static recordUnreadable(developerMessage: string): IdempotencyProblemException {
    const exception = new this('idempotency_record_unreadable', DETAILS.recordUnreadable);
    return Object.assign(exception, { message: developerMessage });
  }

  /** The request body is over the route's `maxRequestBytes`: nothing was claimed. */
  static requestTooLarge(maxRequestBytes: number): IdempotencyProblemException {
    return new IdempotencyProblemException(
      'idempotency_request_too_large',
      `This endpoint accepts request bodies of at most ${maxRequestBytes} bytes with an ` +
        'idempotency key. Nothing was processed.',
    );
  }

  /**
   * The request was completed before, but its response body was not kept: the route keeps no
   * bodies (it mints secrets) or the body was over `maxResponseBytes`. Carries the stored
   * headers (its `Location`, say) and the status the operation completed with.
   * @param place - the route's key header, or where a call keeps its key
   * @param completed - the stored response, without its body
   * @param reason - why the body was not kept
   */
  static responseNotStored(
    place: IdempotencyKeyPlace,
    completed: StoredResponse,
    reason: 'too_large' | 'not_kept',
  ): IdempotencyProblemException {
    const why =
      reason === 'not_kept'
        ? 'its response is not kept because it holds a secret that is shown only once'
        : 'its response was too large to be kept';
    const done =
      typeof place === 'string'
        ? `The request with this ${place} was completed (status ${completed.status})`
        : `The ${place.call} with the key in ${place.where} was completed`;
    const exception = new IdempotencyProblemException(
      'idempotency_response_not_stored',
      `${done}, but ${why}. Do not retry it: look the result up instead` +
        (completed.headers.location !== undefined ? ' at its Location.' : '.'),
      undefined,
      typeof place === 'string' ? undefined : 'The result for this idempotency key was not stored',
    );
    return Object.assign(exception, { completed });
  }

  /**
   * A webhook delivery whose signature does not verify (no header, a malformed one, no
   * signature made with a configured secret, a timestamp outside the tolerance) or cannot be
   * verified (the raw body was not kept): nothing ran, nothing was stored.
   * @param reason - what was wrong, in a clause; never a secret or the expected signature
   */
  static webhookSignatureInvalid(reason: string): IdempotencyProblemException {
    const detail = `This webhook delivery was not processed: ${reason}.`;
    return new this('idempotency_webhook_signature_invalid', detail);
  }

  /** The body was not parsed by the application, so it cannot be compared with a retry's. */
  static bodyUnreadable(contentType: string): IdempotencyProblemException {
    return new IdempotencyProblemException(
      'idempotency_body_unreadable',
      `This endpoint cannot compare request bodies of type "${contentType}", so it cannot ` +
        'accept them with an idempotency key. Send the body as JSON, or ask the API owner to ' +
        'enable parsing of this type.',
    );
  }

  /** The scope resolver returned something that does not identify a caller. */
  static scopeInvalid(): IdempotencyProblemException {
    return new this('idempotency_scope_invalid', DETAILS.scopeInvalid);
  }

  /**
   * The route's `scope` resolver found no caller for the request (it returned `undefined`,
   * `null` or `''`): its key cannot be kept apart from another caller's, so nothing runs.
   */
  static scopeMissing(): IdempotencyProblemException {
    return new this('idempotency_scope_missing', DETAILS.scopeMissing);
  }

  /**
   * The handler asked for the request's transaction (`IdempotencyContext.entityManager`) where
   * there is none: a route without `transactional: true`, or a store without transactions.
   * @param developerMessage - what to fix; becomes the exception's `message` (for logs and stack
   *   traces), never part of the response
   */
  static transactionUnavailable(developerMessage: string): IdempotencyProblemException {
    const exception = new this('idempotency_transaction_unavailable', DETAILS.configuration);
    return Object.assign(exception, { message: developerMessage });
  }

  /**
   * Builds the problem document.
   * @param typeBaseUri - the module's `problemTypeBaseUri`
   */
  toProblem(typeBaseUri: string): IdempotencyProblem {
    return {
      type: `${typeBaseUri}${this.code}`,
      title: this.title,
      status: this.getStatus(),
      detail: this.detail,
      code: this.code,
      ...(this.completed && { completedStatus: this.completed.status }),
    };
  }

  /**
   * The whole response: status, headers (`Cache-Control: no-store`, `Retry-After` where set) and
   * the body bytes — problem+json, or what the application's `errorBody` makes of the problem.
   * @param typeBaseUri - the module's `problemTypeBaseUri`
   * @param errorBody - the module's `errorBody`, when set
   * @throws what `errorBody` throws, or when its body cannot be sent as bytes
   */
  toResponse(typeBaseUri: string, errorBody?: IdempotencyErrorBodyRenderer | null): StoredResponse {
    const problem = this.toProblem(typeBaseUri);
    const kept = Object.entries(this.completed?.headers ?? {});
    const headers: Record<string, string | string[]> = {
      // What was kept of a completed response (its Location, say) but the library's reserved
      // entries, then the problem's own.
      ...Object.fromEntries(kept.filter(([name]) => !name.startsWith(RESERVED_HEADER_PREFIX))),
      'content-type': PROBLEM_CONTENT_TYPE,
      'cache-control': 'no-store',
    };
    if (this.retryAfterSeconds !== undefined)
      headers['retry-after'] = String(this.retryAfterSeconds);
    let body: Buffer = Buffer.from(JSON.stringify(problem), 'utf8');
    if (errorBody) {
      const shaped = errorBody(problem);
      const bytes = responseBytes(shaped.body, shaped.contentType, 'text/plain');
      if (!bytes)
        throw new TypeError('errorBody() returned a body that is not JSON, text or bytes');
      body = bytes.body;
      headers['content-type'] = bytes.contentType ?? 'application/octet-stream';
    }
    return { status: this.getStatus(), headers, body };
  }
}
