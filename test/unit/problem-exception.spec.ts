import { IdempotencyProblemException } from '../../lib/errors/idempotency-problem.exception';

/** The frames of a stack trace (lines after the header). */
const framesOf = (error: Error): string[] =>
  (error.stack ?? '').split('\n').filter((line) => line.trimStart().startsWith('at '));

describe('IdempotencyProblemException', () => {
  const refusals = {
    'a key in use (409)': () => IdempotencyProblemException.keyInUse('Idempotency-Key', 1),
    'a reused key (422)': () => IdempotencyProblemException.keyReused('Idempotency-Key'),
    'a missing key (400)': () => IdempotencyProblemException.keyMissing('Idempotency-Key'),
  };

  it.each(Object.entries(refusals))('answers %s without a stack trace', (_, make) => {
    const refusal = make();
    expect(framesOf(refusal)).toEqual([]);
    expect(refusal.stack).toBe('IdempotencyProblemException: Idempotency Problem Exception');
    expect(refusal.message).toBe('Idempotency Problem Exception');
  });

  it('keeps the stack trace of a fault (5xx), where it may help', () => {
    const fault = IdempotencyProblemException.storeUnavailable(1);
    expect(fault.getStatus()).toBe(503);
    expect(framesOf(fault).join('\n')).toContain('problem-exception.spec');
  });

  it('leaves the application its own Error.stackTraceLimit', () => {
    const before = Error.stackTraceLimit;
    Error.stackTraceLimit = 50;
    try {
      IdempotencyProblemException.keyInUse('Idempotency-Key', 1);
      expect(Error.stackTraceLimit).toBe(50);
      expect(framesOf(new Error('after')).length).toBeGreaterThan(0);
    } finally {
      Error.stackTraceLimit = before;
    }
  });

  it('keeps a developer message set after construction', () => {
    const unreadable = IdempotencyProblemException.recordUnreadable('key k1 is not configured');
    expect(unreadable.message).toBe('key k1 is not configured');
    expect(unreadable.getResponse()).toEqual(
      expect.objectContaining({ code: 'idempotency_record_unreadable' }),
    );
  });
});
