import type { IdempotencyRecordRef } from '../../interfaces/idempotency-record.interface';
import type {
  OperationRecordStore,
  OperationStepTransaction,
} from '../../phases/operation-record.store';
import type { RecordSealer } from './record-sealer';

/** A step transaction whose carried state was opened when the step began. */
class SealingStep implements OperationStepTransaction {
  constructor(
    readonly inner: OperationStepTransaction,
    readonly state: Record<string, unknown>,
  ) {}

  get manager() {
    return this.inner.manager;
  }

  stage(job: Parameters<OperationStepTransaction['stage']>[0]): Promise<void> {
    return this.inner.stage(job);
  }

  commit(): Promise<void> {
    return this.inner.commit();
  }

  rollback(): Promise<void> {
    return this.inner.rollback();
  }

  abandon(): Promise<void> {
    return this.inner.abandon();
  }
}

/**
 * The operations ability of a wrapped store, with an operation's input, its carried state and
 * its final response sealed on the way in and opened on the way out (see `RecordSealer`; its
 * final response is replayed through the store's claim, opened there like any other). Input
 * or state that cannot be opened, or that is in the clear when it may not be, throws `idempotency_record_unreadable` before any step runs:
 * a request's `IdempotencyOperations.run()` answers 500 and leaves the record where it stands,
 * and the completer logs it, gives the record back and leaves it — it is resumed once its key is
 * configured again, or abandoned for an operator when it grows older than `maxAgeSeconds`.
 * @param inner - the wrapped store's operations ability
 * @param sealer - seals with the first key, opens with any
 */
export function sealingOperations(
  inner: OperationRecordStore,
  sealer: RecordSealer,
): OperationRecordStore {
  const unwrap = (step?: OperationStepTransaction) => (step as SealingStep | undefined)?.inner;
  const sealState = (ref: IdempotencyRecordRef, state: Record<string, unknown>) =>
    sealer.sealValue('state', ref.scope, ref.key, state);
  return {
    bind: async (ref, operation, input, settings) => {
      const sealed = sealer.sealValue('input', ref.scope, ref.key, input);
      const bound = await inner.bind(ref, operation, sealed, settings);
      if (!bound) return bound;
      const what = `The record of operation "${bound.operation}"`;
      return {
        ...bound,
        input: sealer.openValue('input', ref.scope, ref.key, bound.input, `${what} (its input)`),
        state: sealer.openValue(
          'state',
          ref.scope,
          ref.key,
          bound.state,
          `${what} (its state)`,
          bound.recoveryPoint,
        ),
      };
    },
    beginStep: async (ref, expectedPoint, isolation) => {
      const step = await inner.beginStep(ref, expectedPoint, isolation);
      if (!step) return step;
      let state: Record<string, unknown>;
      try {
        state = sealer.openValue(
          'state',
          ref.scope,
          ref.key,
          step.state,
          `The record of an operation at "${expectedPoint}" (its state)`,
          expectedPoint,
        );
      } catch (error) {
        await step.rollback().catch(() => undefined);
        throw error;
      }
      return new SealingStep(step, state);
    },
    advance: (ref, expectedPoint, nextPoint, state, step) =>
      inner.advance(ref, expectedPoint, nextPoint, sealState(ref, state), unwrap(step)),
    finish: (ref, expectedPoint, state, response, ttlSeconds, step) =>
      inner.finish(
        ref,
        expectedPoint,
        sealState(ref, state),
        sealer.sealResponse(ref.scope, ref.key, response),
        ttlSeconds,
        unwrap(step),
      ),
    abandon: (ref) => inner.abandon(ref),
    takeOver: (...args) => inner.takeOver(...args),
    abandonOld: (...args) => inner.abandonOld(...args),
    reapExpired: (...args) => inner.reapExpired(...args),
    deleteAbandoned: (...args) => inner.deleteAbandoned(...args),
    listAbandoned: async (limit) =>
      (await inner.listAbandoned(limit)).map((row) => {
        const what = `The abandoned record ${row.recordId} of operation "${row.operation}"`;
        return {
          ...row,
          input: sealer.openValue('input', row.scope, row.key, row.input, `${what} (its input)`),
          state: sealer.openValue(
            'state',
            row.scope,
            row.key,
            row.state,
            `${what} (its state)`,
            row.recoveryPoint,
          ),
        };
      }),
    abandonedSettings: (...args) => inner.abandonedSettings(...args),
    resolveAbandoned: (scope, key, response, ttlSeconds) =>
      inner.resolveAbandoned(
        scope,
        key,
        response && sealer.sealResponse(scope, key, response),
        ttlSeconds,
      ),
  };
}
