/**
 * How an app instance (a child process) reports to the run: one `HISTORY {json}` line on stdout
 * per event, with this machine's epoch time, under the instance's name.
 */
import { HISTORY_LINE } from './history-event';

/** The instance's name in the history: its slot and process id. */
export const instance = `${process.env.HISTORY_INSTANCE}/${process.pid}`;

/**
 * One history line for the run. Writes to a pipe are synchronous on Linux, so a SIGKILL loses no
 * line already written.
 */
export function report(event: Record<string, unknown>): void {
  process.stdout.write(`${HISTORY_LINE}${JSON.stringify({ ...event, at: Date.now() })}\n`);
}
