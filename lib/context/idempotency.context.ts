import { Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { IdempotencyError } from '../config/idempotency-configuration.error';
import { IdempotencyProblemException } from '../errors/idempotency-problem.exception';
import { deriveKey } from './idempotency-identity';
import type { IdempotencyRequestIdentity } from './idempotency-identity';
import { idempotencyRunScopes } from './idempotency-run-scope';

/**
 * What a handler (or any service it calls) can learn about the current idempotent request,
 * without threading parameters through every call. Backed by AsyncLocalStorage, and only while
 * the request's run is live: code the handler leaves running after its request was answered
 * finds no request here.
 *
 * @example
 * constructor(private readonly idempotency: IdempotencyContext) {}
 * async charge(amount: number) {
 *   const em = this.idempotency.entityManager; // same transaction that completes the record
 *   await provider.charge({ amount, idempotencyKey: this.idempotency.derivedKey('charge') });
 * }
 */
@Injectable()
export class IdempotencyContext {
  private readonly logger = new Logger('Idempotency');

  /**
   * The identity of the current request, or `undefined` outside an idempotent handler (and once
   * its request was answered).
   */
  get identity(): IdempotencyRequestIdentity | undefined {
    const identity = idempotencyRunScopes.current()?.run.identity;
    return identity && { ...identity };
  }

  /**
   * The `EntityManager` of the transaction that will also complete the record. Repositories
   * injected with `@InjectRepository()` are not part of that transaction: reach them through
   * this manager (`entityManager.getRepository(Payment)`).
   * @throws IdempotencyProblemException (`idempotency_transaction_unavailable`, 500) outside a
   *   `@Idempotent({ execution: { transactional: true } })` handler on the TypeORM store. On a
   *   decorated route the client gets it as problem+json and the key is released; what to fix
   *   is logged.
   */
  get entityManager(): EntityManager {
    const manager = idempotencyRunScopes.current()?.manager;
    if (manager) return manager as EntityManager;
    const message =
      'nest-idempotency: no transaction here. IdempotencyContext.entityManager is only ' +
      'available inside a handler decorated with @Idempotent({ execution: { transactional: true } }) on the ' +
      'TypeORM store.';
    // The client sees a generic problem; the developer needs the fix, once per occurrence.
    this.logger.error(message);
    throw IdempotencyProblemException.transactionUnavailable(message);
  }

  /**
   * A key for a call to a foreign API (a payment provider), derived from the record: the same
   * on every retry of this (scope, key) — after a release, a takeover or a restart — and
   * different for every other (scope, key) and every other label.
   *
   * @param label - names the foreign call, e.g. `'charge'`
   * @returns 64 hex characters
   * @throws IdempotencyError outside an idempotent handler
   */
  derivedKey(label: string): string {
    const run = idempotencyRunScopes.current()?.run;
    if (run) return deriveKey(run.identity.recordId, label);
    throw new IdempotencyError(
      'nest-idempotency: derivedKey() was called outside an @Idempotent() handler.',
    );
  }
}
