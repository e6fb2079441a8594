/**
 * The history run's app instances as child processes (the chaos suite's `AppCluster` running
 * `history-app.ts`, one slot per adapter), the run's provider, and the handler runs each instance
 * has in flight, read from the history lines the instances print. Being processes, they can be
 * killed with SIGKILL mid-handler and paused with SIGSTOP.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppCluster } from '../app-cluster';
import type { SampleAppProcess } from '../../fixtures/sample-app-process';
import type { AdapterName } from '../../fixtures/test-app';
import { HISTORY_LINE } from './history-event';
import type { HistoryEvent } from './history-event';
import { HistoryRecorder } from './history-recorder';

/** Lease of in-flight requests: short, so a key held by a handler cut off frees soon. */
export const LEASE_SECONDS = 2;

/** The run's history, and a provider whose charges are keyed by the derived key. */
export class Ledger {
  readonly history = new HistoryRecorder();
  private readonly charges = new Set<string>();

  charge(derivedKey: string, key: string): void {
    const created = !this.charges.has(derivedKey);
    this.charges.add(derivedKey);
    this.history.providerCharge(derivedKey, created, key);
  }
}

/**
 * The provider as an HTTP server in the run's process: charges from every instance land in the
 * one history, even from an instance killed right after it called.
 */
export async function startProvider(
  ledger: Ledger,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const { derivedKey, key } = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      ledger.charge(derivedKey, key);
      response.writeHead(201, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const ADAPTERS: AdapterName[] = ['express', 'fastify'];

/** An Express and a Fastify instance of the history app on one database endpoint. */
export class HistoryInstances {
  /** Keys of handler runs started and not ended, by run, by instance (`<slot name>/<pid>`). */
  private readonly inFlight = new Map<string, Map<string, string>>();
  private readonly names: string[];
  readonly cluster: AppCluster;

  constructor(
    private readonly ledger: Ledger,
    prefix: string,
    env: { databaseUrl: string; providerUrl: string },
    private readonly log: (line: string) => void,
  ) {
    this.names = ADAPTERS.map((adapter) => `${prefix}-${adapter}`);
    this.cluster = new AppCluster(
      {
        DATABASE_URL: env.databaseUrl,
        HISTORY_PROVIDER_URL: env.providerUrl,
        IDEMPOTENCY_LOCK_TIMEOUT_SECONDS: String(LEASE_SECONDS),
      },
      ADAPTERS,
      { entry: 'test/chaos/history/history-app.ts', onStart: (slot, app) => this.follow(app) },
    );
  }

  get size(): number {
    return this.names.length;
  }

  /** Starts every instance, one after the other: each runs the migrations. */
  async start(): Promise<void> {
    for (let slot = 0; slot < this.size; slot++) await this.restart(slot);
  }

  /**
   * Starts the slot's instance again (after a kill), under the slot's name. A start that meets a
   * fault (its migrations' connection cut, the endpoint moving) exits; it is tried again.
   */
  async restart(slot: number, attempts = 5): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.cluster.restart(slot, { HISTORY_INSTANCE: this.names[slot] });
      } catch (error) {
        if (attempt >= attempts) throw error;
        this.log(`${this.names[slot]} did not start (${String(error).split('\n')[1]}); again`);
      }
    }
  }

  /** The slot's current instance, as its history lines name it. */
  instance(slot: number): string | undefined {
    const pid = this.cluster.pid(slot);
    return pid === undefined ? undefined : `${this.names[slot]}/${pid}`;
  }

  /** Keys whose handler runs on the slot's instance now. */
  runningOn(slot: number): string[] {
    const instance = this.instance(slot);
    return [...(this.inFlight.get(instance ?? '')?.values() ?? [])];
  }

  /** SIGKILL of the slot's instance, recorded as a kill (its handlers end there). */
  async kill(slot: number): Promise<void> {
    const instance = this.instance(slot);
    if (!instance) return;
    await this.cluster.kill(slot);
    this.ledger.history.events.push({ type: 'kill', instance, at: this.ledger.history.now() });
    this.inFlight.delete(instance);
  }

  /** Exits nobody caused, with the tail of each one's output. */
  get unexpectedExits(): string[] {
    return this.cluster.unexpectedExits;
  }

  stopAll(): Promise<void> {
    return this.cluster.stopAll();
  }

  /** Reads the history lines of one instance's stdout into the run's history, as they come. */
  private follow(app: SampleAppProcess): void {
    let pending = '';
    app.child.stdout!.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString('utf8')).split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        if (line.startsWith(HISTORY_LINE)) this.add(JSON.parse(line.slice(HISTORY_LINE.length)));
      }
    });
  }

  private add(event: HistoryEvent): void {
    event.at = this.ledger.history.sinceStart(event.at);
    this.ledger.history.events.push(event);
    if (event.type === 'handler-start') {
      const runs = this.inFlight.get(event.instance) ?? new Map<string, string>();
      this.inFlight.set(event.instance, runs.set(event.run, event.key));
    } else if (event.type === 'handler-end') {
      // A run's id is `<instance>:<n>`.
      this.inFlight.get(event.run.slice(0, event.run.lastIndexOf(':')))?.delete(event.run);
    }
  }
}
