import type { Logger } from '@nestjs/common';
import type { IdempotencyErrorBodyRenderer } from '../errors/idempotency-problem.types';
import type { IdempotencyEvents } from '../events/idempotency.events';
import type { ResponseSnapshot } from '../http/response-sink.interface';
import type { IdempotencyStore } from '../storage/idempotency.store';

/** What an execution needs from its surroundings; built by `IdempotencyExecutionFactory`. */
export interface IdempotencyExecutionDeps {
  store: IdempotencyStore;
  events: Pick<IdempotencyEvents, 'emit'>;
  /** Reports how long storing the response took (for the completion latency metric). */
  recordCompletion?: (seconds: number, stored: boolean) => void;
  logger: Logger;
  problemTypeBaseUri: string;
  /** The module's `errorBody`, when set. */
  errorBody: IdempotencyErrorBodyRenderer | null;
  /** Logs once per route that its responses cannot be stored. */
  warnUnstorable: (why: string) => void;
  /** Status and headers the route set before its handler ran (its status, `@Header()`s). */
  before: ResponseSnapshot;
  /** The adapter's content type for string bodies. */
  textContentType: string;
  /**
   * Whether `@Idempotent()` marks the moment this route's handler starts. Where it cannot (a
   * route declared in a subclass of a decorated base class), the handler is taken to have
   * started: a request rejected by a pipe is then treated like the handler's own 4xx.
   */
  startMarked: boolean;
}
