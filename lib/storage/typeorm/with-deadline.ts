import { IdempotencyError } from '../../config/idempotency-configuration.error';

/**
 * What a store call was waiting for when its time ran out.
 * @inline
 */
export type DeadlineWait = 'a pooled connection' | 'PostgreSQL to answer';

/**
 * A store call that did not settle within the store's timeout (`typeOrmStore({ timeoutSeconds })`). The
 * database, the network or the connection pool did not answer in time; the connection involved,
 * if any, has been closed rather than given back to the pool.
 */
export class IdempotencyStoreTimeoutError extends IdempotencyError {
  /**
   * @param operation - the store call, e.g. `claim`
   * @param timeoutMs - the time it was given
   * @param waitingFor - what it was waiting for when the time ran out
   */
  constructor(
    readonly operation: string,
    readonly timeoutMs: number,
    readonly waitingFor: DeadlineWait,
  ) {
    super(
      `nest-idempotency: ${operation} timed out after ${timeoutMs} ms waiting for ${waitingFor}`,
    );
  }
}

/**
 * The time one store call may take, shared by every step of it (the wait for a connection, each
 * statement, a claim's retries), so that the call as a whole settles within `timeoutMs`.
 *
 * A step that loses the race keeps running: JavaScript cannot cancel a pending pg call. Its
 * eventual value is handed to `abandon` so the caller can give back what it holds (a
 * connection that arrives after the caller stopped waiting), and its eventual failure is
 * swallowed rather than left unhandled.
 */
export class Deadline {
  private readonly endsAt: number;

  /**
   * @param operation - named in the timeout error
   * @param timeoutMs - the time the whole call may take, from now
   */
  constructor(
    readonly operation: string,
    readonly timeoutMs: number,
  ) {
    this.endsAt = Date.now() + timeoutMs;
  }

  /** The time left before the deadline, in milliseconds (negative once it passed). */
  remainingMs(): number {
    return this.endsAt - Date.now();
  }

  /**
   * Starts one timer for the rest of the call, for a caller that follows its own steps (the
   * pooled statement path), where `race()` would add a timer and a promise per step.
   * @param expired - called once with the timeout error when the deadline passes first
   * @returns the timer, waiting for a pooled connection until told otherwise
   */
  startTimer(expired: (timeout: IdempotencyStoreTimeoutError) => void): DeadlineTimer {
    return new DeadlineTimer(this.operation, this.timeoutMs, this.endsAt - Date.now(), expired);
  }

  /**
   * Waits for `step`, but not past the deadline.
   * @param step - a pending step of the call
   * @param waitingFor - named in the timeout error
   * @param abandon - receives the step's value when it arrives after the deadline
   * @returns the step's value
   * @throws IdempotencyStoreTimeoutError when the deadline passes first
   */
  race<T>(step: Promise<T>, waitingFor: DeadlineWait, abandon?: (late: T) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = this.startTimer(reject);
      timer.waitingFor = waitingFor;
      step.then(
        (value) => (timer.stop() ? resolve(value) : abandon?.(value)),
        (error: unknown) => {
          if (timer.stop()) reject(error);
        },
      );
    });
  }
}

/**
 * A timer started by `Deadline.startTimer()`: a class rather than an object literal with a
 * getter, which V8 builds more slowly, since every statement of the request path starts one.
 */
export class DeadlineTimer {
  /** What the call waits for now, named in the timeout error. */
  waitingFor: DeadlineWait = 'a pooled connection';
  private settled = false;
  private readonly handle: ReturnType<typeof setTimeout>;

  constructor(
    operation: string,
    timeoutMs: number,
    remainingMs: number,
    expired: (timeout: IdempotencyStoreTimeoutError) => void,
  ) {
    this.handle = setTimeout(
      () => {
        this.settled = true;
        expired(new IdempotencyStoreTimeoutError(operation, timeoutMs, this.waitingFor));
      },
      Math.max(0, remainingMs),
    );
    // The timer alone must not keep a process alive that has nothing else to do.
    this.handle.unref?.();
  }

  /** Whether the deadline passed or the call settled: whatever arrives now comes too late. */
  get done(): boolean {
    return this.settled;
  }

  /**
   * Stops the timer as the call settles.
   * @returns false when the deadline passed first or the call already settled: the caller must
   *   not settle it again
   */
  stop(): boolean {
    if (this.settled) return false;
    this.settled = true;
    clearTimeout(this.handle);
    return true;
  }
}

/** Whether `error` is a store call that ran out of time. */
export function isStoreTimeout(error: unknown): error is IdempotencyStoreTimeoutError {
  return error instanceof IdempotencyStoreTimeoutError;
}
