import type { IdempotencyRecordRef } from '../../interfaces/idempotency-record.interface';
import type { OperationRecordStore } from '../../phases/operation-record.store';
import { overriding } from '../overriding';
import type { RecordSealer, SealedRecord } from './record-sealer';

/** The recovery point of a finished operation (its state is sealed for it). */
const FINISHED = 'finished';

/** The scope and key a sealed part is bound to. */
type Keyed = Pick<IdempotencyRecordRef, 'scope' | 'key'>;

/** What of an operation's record is sealed, as a row of `bind()` or `listAbandoned()` has it. */
interface SealedParts {
  recordId: string;
  input: unknown;
  state: Record<string, unknown> | null;
  recoveryPoint: string | null;
}

/**
 * The operations ability of a wrapped store, with an operation's input, its carried state and
 * its final response sealed on the way in and opened on the way out (see `RecordSealer`; its
 * final response is replayed through the store's claim, opened there like any other). Input
 * or state that cannot be opened, or that is in the clear when it may not be, throws
 * `idempotency_record_unreadable` before any step runs: a request's `IdempotencyOperations.run()`
 * answers 500 and leaves the record where it stands, and the completer logs it, gives the record
 * back and leaves it — it is resumed once its key is configured again, or abandoned for an
 * operator when it grows older than `maxAgeSeconds`.
 *
 * A state is sealed for the recovery point it is stored with, and opened for the one the row
 * holds, so a recovery point moved outside the library fails to open; an input is sealed for
 * its record id, and a final response for its record id and fingerprint: those of the run's
 * claim or takeover (`recordOf`), or of the abandoned row an operator resolves, which the
 * resolution then writes only if it still holds them.
 * @param inner - the wrapped store's operations ability
 * @param sealer - seals with the first key, opens with any
 * @param recordOf - the record a run of this instance answers (its claim's, or its takeover's)
 */
export function sealingOperations(
  inner: OperationRecordStore,
  sealer: RecordSealer,
  recordOf: (ref: IdempotencyRecordRef) => SealedRecord | undefined,
): OperationRecordStore {
  const sealState = (ref: IdempotencyRecordRef, state: Record<string, unknown>, point: string) =>
    sealer.sealValue('state', ref.scope, ref.key, state, point);
  const open = <T extends SealedParts>({ scope, key }: Keyed, row: T, what: string): T => {
    const opened = <V>(part: 'input' | 'state', value: V, bound: string | null) =>
      sealer.openValue(part, scope, key, value, `${what} (its ${part})`, bound);
    const input = opened('input', row.input, row.recordId);
    return { ...row, input, state: opened('state', row.state, row.recoveryPoint) };
  };
  return overriding(inner, {
    bind: async (ref, operation, input, settings) => {
      const sealed = sealer.sealValue('input', ref.scope, ref.key, input, recordOf(ref)?.recordId);
      const bound = await inner.bind(ref, operation, sealed, settings);
      const what = `The record ${bound?.recordId} of operation "${bound?.operation}"`;
      return bound && open(ref, bound, what);
    },
    beginStep: async (ref, expectedPoint, isolation) => {
      const step = await inner.beginStep(ref, expectedPoint, isolation);
      if (!step) return step;
      const what = `The record of an operation at "${expectedPoint}" (its state)`;
      try {
        const { scope, key } = ref;
        const state = sealer.openValue('state', scope, key, step.state, what, expectedPoint);
        return overriding(step, { state });
      } catch (error) {
        await step.rollback().catch(() => undefined);
        throw error;
      }
    },
    advance: (ref, expectedPoint, nextPoint, state, step) =>
      inner.advance(ref, expectedPoint, nextPoint, sealState(ref, state, nextPoint), step),
    finish: (ref, expectedPoint, state, response, ttlSeconds, step) => {
      const sealed = sealer.sealResponse(ref.scope, ref.key, response, recordOf(ref));
      const finished = sealState(ref, state, FINISHED);
      return inner.finish(ref, expectedPoint, finished, sealed, ttlSeconds, step);
    },
    listAbandoned: async (limit) =>
      (await inner.listAbandoned(limit)).map((row) =>
        open(row, row, `The abandoned record ${row.recordId} of operation "${row.operation}"`),
      ),
    resolveAbandoned: (scope, key, completion) =>
      inner.resolveAbandoned(
        scope,
        key,
        completion && {
          ...completion,
          response: sealer.sealResponse(scope, key, completion.response, completion.record),
        },
      ),
  });
}
