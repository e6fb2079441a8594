import type { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { OutgoingResponse } from '../utils/response-bytes';

/**
 * What an execution's decision came to, for its transport to render: the handler's answer went
 * to the store (its `executed` event says whether it landed), or the key was given back (with
 * the answer to write instead of the original, if any), or the completion could not commit and
 * the client is refused with a problem.
 */
export type ExecutionResult =
  | { kind: 'stored'; answer: OutgoingResponse }
  | { kind: 'released'; answer?: OutgoingResponse }
  | { kind: 'refused'; problem: IdempotencyProblemException };

/** What Nest's default exception filter answers for an error that is not an HttpException. */
export const INTERNAL_ERROR: OutgoingResponse = {
  status: 500,
  headers: { 'content-type': 'application/json; charset=utf-8' },
  body: Buffer.from(JSON.stringify({ statusCode: 500, message: 'Internal server error' })),
};

/** The key was given back, and the response is written as it is. */
export const RELEASED: ExecutionResult = { kind: 'released' };

/** A decision that names no answer of its own answers with `fallback`. */
export function answeredWith(
  result: ExecutionResult | undefined,
  fallback?: OutgoingResponse,
): ExecutionResult {
  if (result?.kind === 'refused' || result?.answer) return result;
  return { kind: 'released', answer: fallback };
}

/** Where an execution is in its life (the table on `IdempotencyExecution`). */
export type ExecutionStage = 'begun' | 'running' | 'settled' | 'deciding' | 'done';
