import type { IdempotencyEvent } from '../events/idempotency.events';
import type { OperationRecordRow } from './operation-record.store';

type AbandonedEvent = Extract<IdempotencyEvent, { type: 'operation_abandoned' }>;

/** The `operation_abandoned` event of a record: where it stood, and nothing of its owner. */
export function abandonedEvent(
  {
    scope,
    key,
    operation,
    recoveryPoint,
  }: Pick<OperationRecordRow, 'scope' | 'key' | 'operation' | 'recoveryPoint'>,
  reason: AbandonedEvent['reason'],
): AbandonedEvent {
  return { type: 'operation_abandoned', scope, key, operation, recoveryPoint, reason };
}
