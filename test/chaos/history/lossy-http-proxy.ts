/**
 * A lossy HTTP proxy between the history run's clients and one app slot, as a flaky network or
 * load balancer would be: it drops a request (the connection is cut before it reaches the app),
 * delays one, sends one twice (the second copy's answer goes to `onDuplicateAnswer`), or resets
 * the connection after the app answered (the client sees an error and retries with its key). The
 * target is looked up per request, since a killed slot comes back on another port; with the slot
 * down the connection is cut, as a load balancer's would be.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProxyFault = 'drop' | 'delay' | 'duplicate' | 'reset after answer';
export const PROXY_FAULTS: ProxyFault[] = ['drop', 'delay', 'duplicate', 'reset after answer'];

/** An answer the app gave, as the proxy read it. */
export interface ProxiedAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

export interface LossyHttpProxyOptions {
  /** The slot's base URL now, undefined while it is down. */
  target: () => string | undefined;
  /** Chance of each fault per request (0 turns the proxy into a plain one). */
  rate: number;
  /** A fault fired on a request with this idempotency key. */
  onFault: (fault: ProxyFault, key: string) => void;
  /** The app's answer to a duplicated copy, which no client saw. */
  onDuplicateAnswer: (key: string, body: Buffer, startedAt: number, answer?: ProxiedAnswer) => void;
  now: () => number;
  /** Which fault a request meets, if any. @defaultValue one of the four at random, at `rate` */
  draw?: (rate: number) => ProxyFault | undefined;
}

const drawAtRandom = (rate: number) =>
  Math.random() < rate ? PROXY_FAULTS[Math.floor(Math.random() * PROXY_FAULTS.length)] : undefined;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export class LossyHttpProxy {
  /** Chance of a fault per request; set to 0 for the final probes. */
  rate: number;

  private constructor(
    private readonly server: Server,
    private readonly options: LossyHttpProxyOptions,
  ) {
    this.rate = options.rate;
    server.on('request', (request, response) => void this.handle(request, response));
  }

  static async start(options: LossyHttpProxyOptions): Promise<LossyHttpProxy> {
    const proxy = new LossyHttpProxy(createServer(), options);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const body = await readBody(request);
    const key = String(request.headers['idempotency-key'] ?? '');
    const fault = (this.options.draw ?? drawAtRandom)(this.rate);
    if (fault) this.options.onFault(fault, key);
    if (fault === 'drop') return void request.socket.destroy();
    if (fault === 'delay') await sleep(200 + Math.random() * 1_300);
    if (fault === 'duplicate') {
      const startedAt = this.options.now();
      void sleep(Math.random() * 50)
        .then(() => this.forward(request, body))
        .then((answer) => this.options.onDuplicateAnswer(key, body, startedAt, answer));
    }
    const answer = await this.forward(request, body);
    if (!answer || fault === 'reset after answer') return void request.socket.destroy();
    response.writeHead(answer.status, answer.headers).end(answer.body);
  }

  /** The request sent to the slot; undefined when it is down or the exchange broke. */
  private async forward(
    request: IncomingMessage,
    body: Buffer,
  ): Promise<ProxiedAnswer | undefined> {
    const target = this.options.target();
    if (!target) return undefined;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(request.headers)) {
      if (!HOP_BY_HOP.has(name) && name !== 'host' && typeof value === 'string')
        headers[name] = value;
    }
    try {
      const upstream = await fetch(`${target}${request.url}`, {
        method: request.method,
        headers,
        body: request.method === 'GET' ? undefined : body,
        signal: AbortSignal.timeout(20_000),
      });
      const answerHeaders: Record<string, string> = {};
      upstream.headers.forEach((value, name) => {
        if (!HOP_BY_HOP.has(name)) answerHeaders[name] = value;
      });
      const bytes = Buffer.from(await upstream.arrayBuffer());
      return { status: upstream.status, headers: answerHeaders, body: bytes };
    } catch {
      return undefined;
    }
  }
}
