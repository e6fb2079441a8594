import { deriveKey } from '../context/idempotency-identity';
import type { IdempotencyRun } from '../execution/idempotency-run';
import type { OperationStepTransaction } from './operation-record.store';

/** PostgreSQL aborted the transaction to keep it serializable, or to break a deadlock. */
export function isRetryableConflict(error: unknown): boolean {
  const { code, driverError } = (error ?? {}) as { code?: string; driverError?: { code?: string } };
  return [code, driverError?.code].some((c) => c === '40001' || c === '40P01');
}

/** Whether PostgreSQL's `jsonb` would refuse `value`: it holds no `\u0000` in any string. */
export function storableAsJson(value: unknown): boolean {
  return !JSON.stringify(value ?? null).includes('\\u0000');
}

/**
 * A step's `stage()`. A job's key is SHA-256 (hex) of the record id, the step's name, the
 * job's place among the step's stagings (0, 1, …) and its name, NUL-separated (the derived key
 * of the label made of the last three): stable across retries of the step, distinct for every
 * job of a step, of every other step and of every other record.
 */
export function stagerOf(tx: OperationStepTransaction, run: IdempotencyRun, stepName: string) {
  let staged = 0;
  return async (name: string, args: unknown): Promise<string> => {
    const key = deriveKey(run.identity.recordId, `${stepName}\u0000${staged++}\u0000${name}`);
    await tx.stage({ name, args, key, origin: { scope: run.ref.scope, key: run.ref.key } });
    return key;
  };
}

/**
 * The step's promise, or a rejection with the signal's reason as soon as it aborts (the step
 * goes on in the background; what it produces is ignored).
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
