import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';

/**
 * What the proxy does with one HTTP request: `pass` it and its answer; `lose` the answer (the
 * request reaches the server, which acts and answers, then the client's connection is reset
 * before any byte of the answer reaches it); `hang` (the request reaches the server, the answer
 * is held back and the connection stays open until the client gives up).
 */
export type LossyFate = 'pass' | 'lose' | 'hang';

/** One request seen by the proxy. */
export interface LossyExchange {
  fate: LossyFate;
  /** The status the server answered with (delivered or not), once it answered. */
  status?: number;
}

/** How lossy the proxy is. */
export interface LossyProxyOptions {
  /** The server behind the proxy. */
  target: { host: string; port: number };
  /** Fraction of requests whose answer is lost after the server answered. */
  loseRate: number;
  /** Fraction of requests that hang after reaching the server. */
  hangRate: number;
  /** The request header whose value groups exchanges (`byKey`). @defaultValue `'idempotency-key'` */
  keyHeader?: string;
  /** @defaultValue `Math.random` */
  random?: () => number;
}

/** A connection through the proxy: the request in flight and its fate. */
interface Pipe {
  client: Socket;
  upstream: Socket;
  /** The exchange waiting for its answer, if any. */
  pending?: LossyExchange;
}

/**
 * A fault-injecting HTTP/1.1 proxy on 127.0.0.1, for showing (and testing) what a client must
 * survive: answers lost after the server acted, and requests that hang. The fate of each request
 * is drawn when it starts (the first bytes from the client while no request is in flight on that
 * connection), so keep-alive connections get a fate per request too; HTTP pipelining is not
 * supported (neither Node's `fetch` nor browsers use it).
 */
export class LossyProxy {
  /** Every request seen, by the value of its key header (`''` without one), in order. */
  readonly byKey = new Map<string, LossyExchange[]>();
  private readonly pipes = new Set<Pipe>();
  private readonly keyPattern: RegExp;

  private constructor(
    private readonly server: Server,
    private readonly options: LossyProxyOptions,
  ) {
    const header = (options.keyHeader ?? 'idempotency-key').replace(/[-]/g, '\\-');
    this.keyPattern = new RegExp(`\\r\\n${header}:[ \\t]*([^\\r\\n]*)`, 'i');
    server.on('connection', (client) => this.accept(client));
  }

  /** Starts a proxy on a free port of 127.0.0.1. */
  static async start(options: LossyProxyOptions): Promise<LossyProxy> {
    const server = createServer();
    const proxy = new LossyProxy(server, options);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** `http://127.0.0.1:<port>` */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** How many requests met each fate. */
  counts(): Record<LossyFate, number> {
    const counts: Record<LossyFate, number> = { pass: 0, lose: 0, hang: 0 };
    for (const exchanges of this.byKey.values()) {
      for (const { fate } of exchanges) counts[fate] += 1;
    }
    return counts;
  }

  /** Stops accepting and closes every open connection. */
  async close(): Promise<void> {
    for (const pipe of this.pipes) {
      pipe.client.destroy();
      pipe.upstream.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private draw(): LossyFate {
    const roll = (this.options.random ?? Math.random)();
    if (roll < this.options.loseRate) return 'lose';
    if (roll < this.options.loseRate + this.options.hangRate) return 'hang';
    return 'pass';
  }

  private accept(client: Socket): void {
    const upstream = connect(this.options.target);
    const pipe: Pipe = { client, upstream };
    this.pipes.add(pipe);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.pipes.delete(pipe);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);

    client.on('data', (chunk: Buffer) => {
      if (!pipe.pending) {
        const key = this.keyPattern.exec(chunk.toString('latin1'))?.[1]?.trim() ?? '';
        pipe.pending = { fate: this.draw() };
        const exchanges = this.byKey.get(key) ?? [];
        exchanges.push(pipe.pending);
        this.byKey.set(key, exchanges);
      }
      upstream.write(chunk);
    });

    upstream.on('data', (chunk: Buffer) => {
      const exchange = pipe.pending;
      if (exchange) {
        exchange.status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(chunk.toString('latin1'))?.[1]);
        pipe.pending = undefined;
        if (exchange.fate === 'lose') {
          client.resetAndDestroy();
          upstream.destroy();
          return;
        }
        if (exchange.fate === 'hang') {
          // Hold the answer back: the client sees an open connection that never answers.
          upstream.pause();
          upstream.removeAllListeners('data');
          return;
        }
      }
      client.write(chunk);
    });
  }
}
