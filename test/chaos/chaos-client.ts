import type { AppCluster } from './app-cluster';

/** One request the harness sent and what came back. */
export interface Exchange {
  phase: string;
  account: string | undefined;
  key: string | undefined;
  method: string;
  path: string;
  slot: number;
  /** Milliseconds since the client was created. */
  startedAt: number;
  endedAt: number;
  /** `undefined` when the request failed at the transport level (connection refused, reset…). */
  status: number | undefined;
  replayed: boolean;
  contentType: string;
  retryAfterSeconds: number | undefined;
  body: Buffer;
  error?: string;
  /** The client hung up on purpose before the answer (see `send`'s `hangUpAfterMs`). */
  hungUp?: boolean;
}

/** A request to send, possibly several times. */
export interface ChaosRequest {
  method: 'GET' | 'POST';
  path: string;
  account?: string;
  key?: string;
  body?: object;
}

/** How `sendUntilFinal` retries. */
export interface RetryPolicy {
  /** Slot of the first attempt; later attempts alternate between live slots. */
  firstSlot: number;
  /** The slots attempts may go to (default: every slot). */
  slots?: readonly number[];
  /** Give up (no final answer) after this long. */
  deadlineMs: number;
  /** Cap on a `Retry-After` wait, so the run stays short. */
  maxRetryDelayMs: number;
  phase: string;
}

/** Statuses a client must not retry: the answer is final (and replayed from now on). */
export function isFinal(status: number | undefined): boolean {
  return status !== undefined && status < 500 && ![408, 409, 425, 429].includes(status);
}

/** A short label for a response: `201`, `r201` (replayed), `err` (transport error). */
export function statusLabel(exchange: Exchange): string {
  if (exchange.status === undefined) return 'err';
  return `${exchange.replayed ? 'r' : ''}${exchange.status}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sends requests to the cluster's processes with `fetch` and records every exchange, so the
 * scenarios can check each response afterwards against the database.
 */
export class ChaosClient {
  /** Every exchange, in the order they ended. */
  readonly exchanges: Exchange[] = [];
  private readonly origin = Date.now();
  private readonly pendingBySlot = new Map<number, number>();

  /**
   * @param cluster - where requests go
   * @param timeoutMs - per-request timeout (a timeout is recorded as a transport error)
   */
  constructor(
    private readonly cluster: AppCluster,
    private readonly timeoutMs = 20_000,
  ) {}

  /** Milliseconds since the client was created (the clock of `Exchange` times). */
  now(): number {
    return Date.now() - this.origin;
  }

  /** Requests sent to the slot that have not been answered yet. */
  pending(slot: number): number {
    return this.pendingBySlot.get(slot) ?? 0;
  }

  /**
   * Sends one request to one slot. A slot that is down yields a transport error.
   * @param hangUpAfterMs - close the connection after this long if no answer came yet, as a
   *   client that times out does (recorded as a transport error with `hungUp`)
   * @returns the recorded exchange
   */
  async send(
    slot: number,
    request: ChaosRequest,
    phase: string,
    hangUpAfterMs?: number,
  ): Promise<Exchange> {
    const url = this.cluster.url(slot);
    const startedAt = this.now();
    const exchange: Exchange = {
      phase,
      account: request.account,
      key: request.key,
      method: request.method,
      path: request.path,
      slot,
      startedAt,
      endedAt: startedAt,
      status: undefined,
      replayed: false,
      contentType: '',
      retryAfterSeconds: undefined,
      body: Buffer.alloc(0),
    };
    this.pendingBySlot.set(slot, this.pending(slot) + 1);
    try {
      if (!url) throw new Error(`slot ${slot} is down`);
      const headers: Record<string, string> = {};
      if (request.body) headers['content-type'] = 'application/json';
      if (request.account !== undefined) headers['x-account-id'] = request.account;
      if (request.key !== undefined) headers['idempotency-key'] = request.key;
      const response = await fetch(`${url}${request.path}`, {
        method: request.method,
        headers,
        body: request.body ? JSON.stringify(request.body) : undefined,
        signal: AbortSignal.timeout(hangUpAfterMs ?? this.timeoutMs),
      });
      const body = Buffer.from(await response.arrayBuffer());
      const retryAfter = response.headers.get('retry-after');
      Object.assign(exchange, {
        status: response.status,
        replayed: response.headers.get('idempotent-replayed') === 'true',
        contentType: response.headers.get('content-type') ?? '',
        retryAfterSeconds: retryAfter === null ? undefined : Number(retryAfter),
        body,
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      exchange.error = cause?.code ?? cause?.message ?? (error as Error).message;
      exchange.hungUp = hangUpAfterMs !== undefined && (error as Error).name === 'TimeoutError';
    } finally {
      this.pendingBySlot.set(slot, this.pending(slot) - 1);
    }
    exchange.endedAt = this.now();
    this.exchanges.push(exchange);
    return exchange;
  }

  /**
   * Sends a request until it gets a final answer (`isFinal`), as a well-behaved client would:
   * the same key every time, `Retry-After` honoured on 409 and 503 (capped), a short pause after
   * a transport error or another 5xx, alternating between the live processes.
   *
   * @returns the final exchange (`undefined` if the deadline passed first) and every attempt
   */
  async sendUntilFinal(
    request: ChaosRequest,
    policy: RetryPolicy,
  ): Promise<{ final: Exchange | undefined; attempts: Exchange[] }> {
    const attempts: Exchange[] = [];
    const deadline = Date.now() + policy.deadlineMs;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      const slot = this.pickSlot(policy.firstSlot + attempt, policy.slots);
      if (slot === undefined) {
        await sleep(100);
        continue;
      }
      const exchange = await this.send(slot, request, policy.phase);
      attempts.push(exchange);
      if (isFinal(exchange.status)) return { final: exchange, attempts };
      const jitter = Math.random() * 100;
      if (exchange.status === 409 || exchange.status === 503) {
        const asked = (exchange.retryAfterSeconds ?? 1) * 1000;
        await sleep(Math.min(asked, policy.maxRetryDelayMs) + jitter);
      } else {
        await sleep(100 + jitter);
      }
    }
    return { final: undefined, attempts };
  }

  private pickSlot(preferred: number, allowed?: readonly number[]): number | undefined {
    const live = this.cluster.liveSlots().filter((slot) => !allowed || allowed.includes(slot));
    if (live.length === 0) return undefined;
    const wanted = preferred % this.cluster.size;
    return live.includes(wanted) ? wanted : live[preferred % live.length];
  }
}
