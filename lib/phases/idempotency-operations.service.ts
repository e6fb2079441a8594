import { Inject, Injectable } from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { idempotencyRunScopes } from '../context/idempotency-run-scope';
import { IdempotencyError } from '../config/idempotency-configuration.error';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { IDEMPOTENCY_OPTIONS } from '../config/idempotency.tokens';
import type { ResolvedIdempotencyOptions } from '../interfaces/idempotency-module-options.interface';
import type { AbandonedOperation } from './operation-record.store';
import { sendableResponse, UnsendableResponseError } from '../execution/sendable-response';
import { storedResponseOf } from '../execution/stored-response';
import type { StoredResponse } from '../interfaces/idempotency-record.interface';
import { OperationRunner } from './operation-runner';
import { IdempotencyOperationRegistry } from './operation-registry';
import type { IdempotencyOperation, OperationInput, OperationOutput } from './operation-step';

/** How an operator settles an abandoned operation. */
export interface AbandonedResolution {
  /**
   * The final response retries get from now on (replayed for `ttlSeconds`). Without it the
   * record is deleted and the key runs again from scratch, with new derived keys: do that only
   * once you know the foreign calls did not happen.
   */
  response?: {
    /** A final status. */
    status: number;
    /** The body, sent as JSON (a string or Buffer as it is). */
    body: unknown;
    /** Response headers; those in the route's `replayHeaders` are stored. */
    headers?: Record<string, string>;
  };
}

/**
 * Runs operations in phases (docs/design/contract.md#operations-in-phases) from `@Idempotent()` handlers, and lets operators see and
 * settle the ones that were abandoned.
 *
 * @example
 * \@Post() \@Idempotent()
 * create(@Body() dto: CreatePaymentDto) { return this.operations.run(CreatePayment, dto); }
 */
@Injectable()
export class IdempotencyOperations {
  /** Built by Nest's injector, from the module's own providers. @internal */
  constructor(
    private readonly runner: OperationRunner,
    private readonly registry: IdempotencyOperationRegistry,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  /**
   * Runs, or resumes from its recovery point, the operation of the current idempotent request.
   * The response its last step gives (or an earlier `respond()`) is stored with the move to
   * `finished` and is exactly what the client gets, whatever the handler returns; the handler
   * should return this method's result.
   *
   * Typed by the operation's `defineSteps<Input, State, Output>()`: `input` must be an `Input`
   * and the result is an `Output`, so a handler can declare what its route answers.
   *
   * @param operation - the `@IdempotentOperation()` class
   * @param input - JSON-serialisable input; stored on the record on the first run, and a resumed
   *   run uses the stored one
   * @returns the body of the final response
   * @throws IdempotencyProblemException 503 `idempotency_retry_later` when a step asked to be
   *   retried later (the key was released), 409 `idempotency_key_in_use` when another owner took
   *   the key over, 409 `idempotency_operation_abandoned` when the operation is too old to
   *   resume, 400 `idempotency_operation_input_invalid` when the input cannot be stored (a NUL
   *   character in a string), 500 `idempotency_operation_unavailable` when it cannot run here
   * @throws IdempotencyError outside an `@Idempotent()` handler
   */
  run<Operation extends IdempotencyOperation>(
    operation: Type<Operation>,
    input: OperationInput<Operation>,
  ): Promise<OperationOutput<Operation>>;
  /**
   * Runs, or resumes, the operation registered under `operation` (its `@IdempotentOperation()`
   * name), as the class overload does. A name carries no types: the input is not checked and
   * the result is `unknown`; pass the class where you can.
   * @param operation - the operation's name
   * @param input - JSON-serialisable input
   * @returns the body of the final response
   */
  run(operation: string, input: unknown): Promise<unknown>;
  async run(operation: Type<IdempotencyOperation> | string, input: unknown): Promise<unknown> {
    const run = idempotencyRunScopes.current()?.run;
    if (!run) {
      throw new IdempotencyError(
        'nest-idempotency: IdempotencyOperations.run() was called outside an @Idempotent() handler.',
      );
    }
    this.runner.records(); // fails first when the store cannot run operations at all
    const registered = this.registry.operation(operation as Type<IdempotencyOperation> | string);
    // From here on the operation concludes the run, whatever the handler does with this result.
    const result = await run.operate(() => this.runner.run(registered, input, run));
    const { retryAfterSeconds } = this.options;
    switch (result.kind) {
      case 'completed':
        return result.body;
      case 'released':
        throw IdempotencyProblemException.retryLater(retryAfterSeconds);
      case 'abandoned':
        throw IdempotencyProblemException.operationAbandoned();
      default:
        throw IdempotencyProblemException.leaseLost(retryAfterSeconds);
    }
  }

  /**
   * Abandoned operations, longest abandoned first: too old to resume (`maxAgeSeconds`)
   * or past their TTL when the purge ran. Each needs a human: check the foreign system (the
   * derived keys are `sha256(recordId + '\0' + label)`), then `resolveAbandoned()`.
   * @param limit - at most this many
   */
  listAbandoned(limit = 100): Promise<AbandonedOperation[]> {
    return this.runner.records().listAbandoned(limit);
  }

  /**
   * Settles an abandoned operation.
   * @param scope - the record's scope
   * @param key - its Idempotency-Key
   * @param resolution - a response to replay from now on, or nothing to delete the record. The
   *   response is stored as the route that started the operation stores its own: its
   *   `replayHeaders` only, replayed for its `ttlSeconds`
   * @returns false when no abandoned record has that (scope, key)
   * @throws IdempotencyError when Node.js could not send the response (a status outside
   *   100–599, CR or LF in a header, a body that is not JSON, a string or bytes); nothing is stored
   */
  async resolveAbandoned(
    scope: string,
    key: string,
    resolution: AbandonedResolution = {},
  ): Promise<boolean> {
    const operations = this.runner.records();
    const given = resolution.response;
    if (!given) return operations.resolveAbandoned(scope, key);
    let outgoing: StoredResponse;
    try {
      outgoing = sendableResponse(given);
    } catch (error) {
      if (!(error instanceof UnsendableResponseError)) throw error;
      throw new IdempotencyError(
        `nest-idempotency: resolveAbandoned() refused a response with ${error.why}: Node.js ` +
          'could not send it to a retry; nothing was stored.',
      );
    }
    const record = await operations.abandonedRecord(scope, key);
    if (!record) return false;
    // As the route that started the operation would have stored it (older records: the module's).
    // Its replayHeaders only, and the body whole: an operator's answer is never cut.
    const { ttlSeconds, replayHeaders } = record.settings ?? this.options;
    const response = storedResponseOf(outgoing, { ttlSeconds, replayHeaders });
    return operations.resolveAbandoned(scope, key, { record, response, ttlSeconds });
  }
}
