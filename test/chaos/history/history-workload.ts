/**
 * The history run's clients: payments with keys through every instance (transactional, plain and
 * staged in turn), retried with the same key
 * until final, joined by a duplicate that asks to wait (`Prefer: wait`), and retried after the
 * final answer with the same body (a replay) or another one (a 422). Every attempt goes into the
 * history.
 */
import type { Ledger } from './history-instances';

/** Where clients send: an instance's base URL (through its lossy proxy). */
export interface Target {
  url: string;
}

interface PaymentBody {
  amount: number;
}

/** What the clients did, for the summary. */
export interface WorkloadCounts {
  keys: number;
  requests: number;
  /** Attempts after a key's first: retries until final, waiting duplicates, retries after final. */
  retries: number;
  /** Attempts that got no answer at all (the request timed out or its connection broke). */
  transportErrors: number;
  /** Webhook events sent (among `keys`), and their signed deliveries (among `requests`). */
  webhookEvents: number;
  webhookDeliveries: number;
}

export const newCounts = (): WorkloadCounts => ({
  keys: 0,
  requests: 0,
  retries: 0,
  transportErrors: 0,
  webhookEvents: 0,
  webhookDeliveries: 0,
});

/**
 * How long a client waits for an answer before it gives up and retries elsewhere: shorter than a
 * SIGSTOP pause, so the retry meets a paused owner's expired lease on the other instance.
 */
const TIMEOUT_MS = 2_500;
/** A client that asked to wait (`Prefer: wait=5`) waits that long. */
const WAITER_TIMEOUT_MS = 8_000;

/** A key's route by its index: transactional, plain, or staged (an operation staging a job). */
export const routeOf = (index: number) => ['tx', 'plain', 'staged'][index % 3];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const pick = <T>(items: T[], index: number) => items[index % items.length];

/** Whether an answer ends a client's retries: the route's own answer, or a refused body. */
const isFinal = (status: number | undefined) =>
  status !== undefined && status < 500 && status !== 409 && status !== 425 && status !== 429;

/** One POST, recorded in the history under `fields.key`; returns its status (undefined: none). */
export async function postRecorded(
  ledger: Ledger,
  counts: WorkloadCounts,
  fields: { key: string; client: string; request: unknown },
  post: { url: string; headers: Record<string, string>; body: string; timeoutMs: number },
): Promise<number | undefined> {
  counts.requests++;
  const recorded = { ...fields, startedAt: ledger.history.now() };
  try {
    const response = await fetch(post.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...post.headers },
      body: post.body,
      signal: AbortSignal.timeout(post.timeoutMs),
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    ledger.history.answer(recorded, {
      status: response.status,
      contentType: response.headers.get('content-type') ?? undefined,
      replayed: response.headers.get('idempotent-replayed') === 'true',
      retryAfter: response.headers.get('retry-after') ?? undefined,
      body: bytes,
    });
    return response.status;
  } catch {
    counts.transportErrors++;
    ledger.history.answer(recorded, {});
    return undefined;
  }
}

/** Sends one attempt, records it, and returns its status (undefined when the transport failed). */
export function attempt(
  ledger: Ledger,
  counts: WorkloadCounts,
  target: { instance: Target; route: string; key: string; client: string },
  body: PaymentBody,
  headers: Record<string, string> = {},
): Promise<number | undefined> {
  return postRecorded(
    ledger,
    counts,
    { key: target.key, client: target.client, request: body },
    {
      url: `${target.instance.url}/payments/${target.route}`,
      headers: { 'idempotency-key': target.key, ...headers },
      body: JSON.stringify(body),
      timeoutMs: headers.prefer ? WAITER_TIMEOUT_MS : TIMEOUT_MS,
    },
  );
}

/**
 * Sends attempt after attempt (`send(n)`, the n-th) until one is final or `deadline` (epoch ms)
 * passes, with a pause between two.
 */
export async function untilFinal(
  counts: WorkloadCounts,
  deadline: number,
  send: (n: number) => Promise<number | undefined>,
): Promise<void> {
  for (let n = 0; Date.now() < deadline; n++) {
    if (n > 0) counts.retries++;
    if (isFinal(await send(n))) return;
    await sleep(200 + Math.random() * 300);
  }
}

/** One key's client: sends until final (bounded), on instance after instance. */
function payUntilFinal(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  plan: { route: string; key: string; client: string; first: number; deadline: number },
  body: PaymentBody,
  headers: Record<string, string> = {},
): Promise<void> {
  return untilFinal(counts, plan.deadline, (n) =>
    attempt(ledger, counts, { ...plan, instance: pick(instances, plan.first + n) }, body, headers),
  );
}

/** Runs one key's whole story: first client, maybe a waiting duplicate, maybe later retries. */
async function payKey(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  key: string,
  index: number,
  retryWindowMs: number,
): Promise<void> {
  counts.keys++;
  const route = routeOf(index);
  const body = { amount: 100 + index };
  const deadline = Date.now() + retryWindowMs;
  const plan = (client: string, first: number) => ({ route, key, client, first, deadline });
  const clients = [payUntilFinal(ledger, counts, instances, plan('first', index), body)];
  if (Math.random() < 0.4) {
    counts.retries++;
    const waiting = sleep(20).then(() =>
      payUntilFinal(ledger, counts, instances, plan('waiter', index + 1), body, {
        prefer: 'wait=5',
      }),
    );
    clients.push(waiting);
  }
  await Promise.all(clients);
  if (Math.random() < 0.3) {
    counts.retries++;
    await payUntilFinal(ledger, counts, instances, plan('again', index + 1), body);
  }
  if (Math.random() < 0.2) {
    counts.retries++;
    await payUntilFinal(ledger, counts, instances, plan('other-body', index), {
      amount: 1 + index,
    });
  }
}

/**
 * `workers` concurrent clients each run `story` for key after key (`<prefix>-<index>`) until
 * `untilMs` (epoch ms). Returns the keys, in index order.
 */
export async function keyAfterKey(
  options: { prefix: string; workers: number; untilMs: number },
  story: (key: string, index: number) => Promise<void>,
): Promise<string[]> {
  const keys: string[] = [];
  const worker = async () => {
    while (Date.now() < options.untilMs) {
      const key = `${options.prefix}-${keys.length}`;
      keys.push(key);
      await story(key, keys.length - 1);
    }
  };
  await Promise.all(Array.from({ length: options.workers }, worker));
  return keys;
}

/**
 * `workers` concurrent clients send key after key until `untilMs` (epoch ms), each key retried
 * for at most `retryWindowMs`. Returns the keys sent.
 */
export function runWorkload(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  options: { prefix: string; workers: number; untilMs: number; retryWindowMs: number },
): Promise<string[]> {
  return keyAfterKey(options, (key, index) =>
    payKey(ledger, counts, instances, key, index, options.retryWindowMs),
  );
}

/** After the settle period: every key once more with its first body, until final (bounded). */
export async function probeKeys(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  keys: string[],
  retryWindowMs: number,
): Promise<void> {
  const deadline = Date.now() + retryWindowMs;
  const queue = keys.map((key, index) => ({ key, index }));
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const { key, index } = next;
      const route = routeOf(index);
      const plan = { route, key, client: 'probe', first: index + 1, deadline };
      await payUntilFinal(ledger, counts, instances, plan, { amount: 100 + index });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}
