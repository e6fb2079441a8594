import { HttpException, Logger, StreamableFile } from '@nestjs/common';
import type { ResponseSnapshot } from '../http/response-sink.interface';
import { responseBytes } from '../utils/response-bytes';
import type { OutgoingResponse } from '../utils/response-bytes';

const logger = new Logger('Idempotency');

/** How a handler's own work settled: the value it produced, or what it threw. */
export type HandlerOutcome = { kind: 'value'; value: unknown } | { kind: 'error'; error: unknown };

/**
 * The handler's own outcome written the way Nest's default reply and exception filter write it:
 * the route's status and headers as they were set before the handler ran, the value as JSON or
 * text, an `HttpException` as its status and JSON body. Used when the response left before the
 * handler settled (an outer timeout's 408), so that what a retry replays is what the handler
 * produced — outer interceptors and filters are not applied to it.
 *
 * Never throws: it runs after the client was answered, where a throw would be an unhandled
 * rejection and the key would stay held. A value (or an `HttpException` body) that
 * `JSON.stringify` refuses — a BigInt, an object graph with a cycle — has no bytes, like a
 * stream: it is logged as an error and nothing is stored.
 *
 * @param outcome - how the handler settled
 * @param before - status and headers set on the response before the handler ran
 * @param textContentType - the adapter's content type for strings
 * @returns undefined when the outcome has no bytes to store (a stream, a non-HTTP error, a
 *   value that cannot be serialized)
 */
export function renderHandlerOutcome(
  outcome: HandlerOutcome,
  before: ResponseSnapshot,
  textContentType: string,
): OutgoingResponse | undefined {
  try {
    const headers = { ...before.headers };
    if (outcome.kind === 'value') {
      if (outcome.value instanceof StreamableFile) return undefined;
      const type = headers['content-type'] as string;
      const bytes = responseBytes(outcome.value, type, textContentType);
      if (!bytes) return undefined;
      if (bytes.contentType !== undefined) headers['content-type'] = bytes.contentType;
      return { status: before.status, headers, body: bytes.body };
    }
    const { error } = outcome;
    if (!(error instanceof HttpException)) return undefined;
    const status = error.getStatus();
    const response = error.getResponse();
    const body =
      typeof response === 'object' && response !== null
        ? response
        : { statusCode: status, message: response };
    headers['content-type'] = 'application/json; charset=utf-8';
    return { status, headers, body: Buffer.from(JSON.stringify(body), 'utf8') };
  } catch (error) {
    logger.error(
      'What an idempotent handler produced after its response was decided elsewhere (an outer ' +
        'timeout, say) cannot be serialized as JSON: nothing is stored and its key is released',
      (error as Error).stack,
    );
    return undefined;
  }
}
