import type { SampleHttpAdapter } from '../../sample-app/config/sample-app.config';
import { spawnSampleApp } from '../fixtures/sample-app-process';
import type { SampleAppProcess } from '../fixtures/sample-app-process';

/** Every app process the harness started and has not seen exit, for the last-resort cleanup. */
const running = new Set<SampleAppProcess>();

/** Kills every app process still running (called when the harness exits, however it exits). */
export function killAllApps(): void {
  for (const app of running) app.child.kill('SIGKILL');
  running.clear();
}

interface Slot {
  adapter: SampleHttpAdapter;
  app?: SampleAppProcess;
  /** Set while the harness itself kills the slot's process. */
  killing: boolean;
  /** Resolves when the slot is up again after a restart. */
  starting?: Promise<void>;
}

/** Another app than the sample (the history run's), and who wants to hear of each process. */
export interface AppClusterOptions {
  /** The app's entry script, relative to the repository root. @defaultValue the sample app */
  entry?: string;
  /** Called with each process once it listens (its output can be followed from there). */
  onStart?: (slot: number, app: SampleAppProcess) => void;
}

/**
 * Two (or more) sample-app processes on one database, each in a slot that can be killed with
 * SIGKILL and restarted (on a new port), or paused (SIGSTOP) and resumed. Exits the harness did
 * not cause are recorded.
 */
export class AppCluster {
  /** One line per process exit the harness did not cause, with the tail of its output. */
  readonly unexpectedExits: string[] = [];
  /** Process starts, the first ones included. */
  starts = 0;
  /** Output of every process that has exited, for `unhandledErrors()`. */
  private readonly pastOutput: string[] = [];
  private readonly slots: Slot[];
  /** Processes expected to kill themselves (a crash hook): their exit is not unexpected. */
  private readonly expectedCrashes = new Set<SampleAppProcess>();
  private readonly lastOutputs = new Map<number, string>();

  /**
   * @param env - environment shared by every process (DATABASE_URL, lease, …)
   * @param adapters - one adapter per slot
   */
  constructor(
    private readonly env: Record<string, string>,
    adapters: SampleHttpAdapter[],
    private readonly options: AppClusterOptions = {},
  ) {
    this.slots = adapters.map((adapter) => ({ adapter, killing: false }));
  }

  /** Number of slots. */
  get size(): number {
    return this.slots.length;
  }

  /**
   * Starts every slot side by side. The database must already hold the app's schema (see
   * `createSchemaTemplate()`): its migrations are not safe to run from two processes at once.
   * @param envPerSlot - extra environment per slot (e.g. `PROVIDER_LATENCY_MS`)
   */
  async start(envPerSlot: Record<string, string>[] = []): Promise<void> {
    await Promise.all(this.slots.map((_, slot) => this.startSlot(slot, envPerSlot[slot] ?? {})));
  }

  /** Base URL of the slot's process, or `undefined` while it is down. */
  url(slot: number): string | undefined {
    return this.slots[slot].app?.url;
  }

  /** Adapter of the slot. */
  adapter(slot: number): SampleHttpAdapter {
    return this.slots[slot].adapter;
  }

  /** PID of the slot's current process. */
  pid(slot: number): number | undefined {
    return this.slots[slot].app?.child.pid;
  }

  /** Slots whose process is up. */
  liveSlots(): number[] {
    return this.slots.flatMap((slot, index) => (slot.app ? [index] : []));
  }

  /** `kill -9` of the slot's process; resolves once it exited. */
  async kill(slot: number): Promise<void> {
    const entry = this.slots[slot];
    const app = entry.app;
    if (!app) return;
    entry.killing = true;
    entry.app = undefined;
    await app.stop('SIGKILL');
    entry.killing = false;
  }

  /** SIGSTOP of the slot's process: it holds its connections and leases but runs nothing. */
  pause(slot: number): void {
    this.slots[slot].app?.child.kill('SIGSTOP');
  }

  /** SIGCONT of the slot's process after `pause()`. */
  resume(slot: number): void {
    this.slots[slot].app?.child.kill('SIGCONT');
  }

  /**
   * Marks the slot's current process as one that will kill itself (the sample's
   * `SAMPLE_CRASH_AT`), so its exit is not recorded as unexpected.
   * @returns how it exited (`SIGKILL` for a crash hook), once it did
   */
  expectCrash(slot: number): Promise<number | string | null> {
    const app = this.slots[slot].app;
    if (!app) return Promise.reject(new Error(`slot ${slot} is down`));
    this.expectedCrashes.add(app);
    return app.exited;
  }

  /** Output of the slot's current process, or of the last one that exited in it. */
  lastOutput(slot: number): string {
    return this.slots[slot].app?.output() ?? this.lastOutputs.get(slot) ?? '';
  }

  /** Starts a new process in a slot that is down (or was never started). */
  restart(slot: number, extraEnv: Record<string, string> = {}): Promise<void> {
    const entry = this.slots[slot];
    entry.starting ??= this.startSlot(slot, extraEnv).finally(() => (entry.starting = undefined));
    return entry.starting;
  }

  /**
   * Errors the processes' exception handler logged (unhandled handler errors, answered 500),
   * grouped by message and the first stack frame in the app or the library, most frequent
   * first: the evidence behind an unexpected 5xx.
   */
  unhandledErrors(): string[] {
    const outputs = [...this.pastOutput, ...this.slots.flatMap((slot) => slot.app?.output() ?? [])];
    const counts = new Map<string, number>();
    for (const output of outputs) {
      const lines = output.split('\n');
      lines.forEach((line, index) => {
        const match = /ERROR \[ExceptionsHandler\] (.*)$/.exec(line);
        if (!match) return;
        // The first frame in the app (the sample app or a chaos app) or the library says who called.
        const frames: string[] = [];
        for (let next = index + 1; /^\s*at /.test(lines[next] ?? ''); next++) {
          frames.push(lines[next].trim());
        }
        const site =
          frames.find(
            (frame) =>
              /\/(sample-app|lib|test\/chaos)\//.test(frame) && !frame.includes('node_modules'),
          ) ?? frames[0];
        const entry = `${match[1].trim()}${site ? ` (${site.replace(/^at /, '')})` : ''}`;
        counts.set(entry, (counts.get(entry) ?? 0) + 1);
      });
    }
    return [...counts].sort((a, b) => b[1] - a[1]).map(([entry, count]) => `${count}x ${entry}`);
  }

  /** Stops every process (SIGTERM, then SIGKILL after 5 s). */
  async stopAll(): Promise<void> {
    await Promise.all(this.slots.map((entry) => entry.starting?.catch(() => undefined)));
    await Promise.all(
      this.slots.map(async (entry) => {
        const app = entry.app;
        if (!app) return;
        entry.killing = true;
        entry.app = undefined;
        const timer = setTimeout(() => app.child.kill('SIGKILL'), 5000);
        app.child.kill('SIGCONT'); // a paused process would hold SIGTERM until the SIGKILL
        await app.stop('SIGTERM');
        clearTimeout(timer);
      }),
    );
  }

  private async startSlot(slot: number, extraEnv: Record<string, string>): Promise<void> {
    const entry = this.slots[slot];
    const env = { ...this.env, ...extraEnv, HTTP_ADAPTER: entry.adapter };
    const app = await spawnSampleApp(env, undefined, this.options.entry);
    this.starts++;
    running.add(app);
    app.child.once('exit', (code, signal) => {
      running.delete(app);
      this.pastOutput.push(app.output());
      this.lastOutputs.set(slot, app.output());
      if (entry.app === app) entry.app = undefined;
      if (!entry.killing && !this.expectedCrashes.delete(app)) {
        this.unexpectedExits.push(
          `slot ${slot} (${entry.adapter}, pid ${app.child.pid}) exited with ${code ?? signal}: ` +
            app.output().split('\n').slice(-15).join('\n'),
        );
      }
    });
    entry.app = app;
    this.options.onStart?.(slot, app);
  }
}
