import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { Observable, of } from 'rxjs';
import type { IdempotencyExecutionFactory } from '../execution/idempotency-execution.factory';
import type { IdempotencyExecution } from '../execution/idempotency-execution';
import type { IdempotencyCallInput, IdempotencyTransport } from '../execution/idempotency-runner';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { fingerprintWithin } from '../execution/request-fingerprint';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import type { OutgoingResponse } from '../utils/response-bytes';
import type { IdempotencyCallTransport } from './idempotency-call-transport';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * A handler that is not an HTTP route (a message, a GraphQL mutation) as the runner's transport,
 * read and answered by the call transport its decorator set. The handler's last value is stored
 * as JSON and returned to every later call with the key; a handler that throws gives the key
 * back, so the next delivery runs it.
 * @param transport - how the decorator's calls are read and refused
 * @param executions - starts the execution of a claimed call
 * @internal
 */
export function callTransportAdapter(
  transport: IdempotencyCallTransport,
  executions: IdempotencyExecutionFactory,
): IdempotencyTransport {
  return {
    read(context, route): IdempotencyCallInput {
      const call = transport.read(context, route);
      return {
        ...call,
        label: `${call.method} ${call.path}`,
        // Its kind, what it names and its data, as canonical JSON.
        fingerprint: (scope) =>
          fingerprintWithin(route, {
            scope,
            method: call.method,
            url: call.path,
            body: call.payload,
            contentType: 'application/json',
            headers: [],
            maxBodyBytes: route.maxRequestBytes,
          }),
      };
    },
    start: (context, route, won) => executions.startCall(context, route, won),
    run: (execution, next, context) => run(execution, next, transport, context),
    replay(context, replay): Observable<unknown> {
      transport.replayed?.(context);
      const stored = valueOf(replay.response);
      return of(transport.revive ? transport.revive(stored, context) : stored);
    },
    refuse: (problem, context) => transport.refuse(problem, context, false),
  };
}

/** Runs the handler once; stores its last value, or gives the key back when it throws. */
function run(
  execution: IdempotencyExecution,
  next: CallHandler,
  transport: IdempotencyCallTransport,
  context: ExecutionContext,
): Observable<unknown> {
  return new Observable((subscriber) => {
    let last: unknown;
    execution.handle(next).subscribe({
      next: (value) => (last = value),
      // A run the store failed under (its transaction's connection cut) is refused in the
      // transport's own form; the handler's own errors pass as they are.
      error: (error) =>
        void execution.giveBack().then(() => {
          const ours = error instanceof IdempotencyProblemException;
          subscriber.error(ours ? transport.refuse(error, context, true) : error);
        }),
      complete: () => {
        let outgoing: OutgoingResponse;
        try {
          outgoing = responseOf(last);
        } catch (error) {
          void execution.giveBack().then(() => subscriber.error(error));
          return;
        }
        void execution.respond(outgoing).then((decided) => {
          // The handler ran, but its completion could not commit: refused all the same.
          if (decided?.kind === 'refused') {
            return subscriber.error(transport.refuse(decided.problem, context, true));
          }
          subscriber.next(last);
          subscriber.complete();
        });
      },
    });
  });
}

/** A handler's value as the response kept in its record: JSON, or no body for `undefined`. */
function responseOf(value: unknown): OutgoingResponse {
  const json = value === undefined ? undefined : JSON.stringify(value);
  return {
    status: 200,
    headers: json === undefined ? {} : { 'content-type': JSON_TYPE },
    body: json === undefined ? Buffer.alloc(0) : Buffer.from(json, 'utf8'),
  };
}

/** The value a record keeps: what the handler returned, as JSON brings it back. */
function valueOf(response: StoredResponse): unknown {
  return response.body.length === 0 ? undefined : JSON.parse(response.body.toString('utf8'));
}
