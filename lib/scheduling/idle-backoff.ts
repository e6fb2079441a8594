/**
 * How long a poller on a fixed tick skips ticks between polls: none while polls find work, then
 * a wait that doubles per idle poll up to a cap, and never past a known due time. An idle poller
 * thus costs a poll per `maxSeconds` instead of one per `tickSeconds`.
 */
export class IdleBackoff {
  private idlePolls = 0;

  /**
   * @param tickSeconds - the poller's tick: the gap between polls while they find work
   * @param maxSeconds - the longest gap between two idle polls (no backoff when not above
   *   `tickSeconds`)
   */
  constructor(
    private readonly tickSeconds: number,
    private readonly maxSeconds: number,
  ) {}

  /**
   * The wait after a poll, before the next tick that may poll.
   * @param foundWork - whether the poll found anything to do
   * @param dueInSeconds - when known, the seconds until the next piece of work is due
   * @returns seconds of ticks to skip (0: the next tick polls)
   */
  next(foundWork: boolean, dueInSeconds?: number): number {
    if (foundWork) {
      this.idlePolls = 0;
      return 0;
    }
    this.idlePolls = Math.min(this.idlePolls + 1, 60);
    // The next poll comes at the first tick after the wait: half a tick short of the gap, so
    // that tick is the one `gap` after this poll, however long the poll took (under half a tick).
    const gap = Math.min(this.maxSeconds, this.tickSeconds * 2 ** this.idlePolls);
    const wait = Math.max(0, gap - this.tickSeconds / 2);
    return dueInSeconds === undefined ? wait : Math.max(0, Math.min(wait, dueInSeconds));
  }

  /** Back to polling every tick: work arrived. */
  reset(): void {
    this.idlePolls = 0;
  }
}
