/**
 * One round of the history run: a fresh primary and streaming replica, an Express and a Fastify
 * instance (child processes) behind the moving endpoint, each reached by clients through a lossy
 * proxy, the workload (payments, staged jobs, webhooks
 * delivered several times) with faults injected (`injectFaults`: kills, pauses, cut connections,
 * failovers), a settle period, a probe of every key, and the local effects and staged jobs' effects read back. The
 * clusters are removed when the round ends, and by the interrupt handler if it is cut short.
 */
import { onInterrupt } from '../emergency-cleanup';
import { MovingEndpoint } from '../failover/moving-endpoint';
import { PostgresPair, query } from '../failover/postgres-pair';
import type { Replication } from '../failover/postgres-pair';
import { injectFaults } from './history-faults';
import { HistoryInstances, LEASE_SECONDS, startProvider } from './history-instances';
import type { Ledger } from './history-instances';
import { probeKeys, routeOf, runWorkload } from './history-workload';
import type { WorkloadCounts } from './history-workload';
import { probeWebhooks, sendWebhooks } from './history-webhook-client';
import { LossyHttpProxy } from './lossy-http-proxy';

export interface RoundOptions {
  round: number;
  replication: Replication;
  workloadMs: number;
  workers: number;
  failovers: number;
  /** Chance of a proxy fault per request. */
  proxyRate: number;
  log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long a client retries one key before it gives up. */
const RETRY_WINDOW_MS = 30_000;

/**
 * Each order row (a transactional handler's effect) and each webhook effect row (one per run of
 * the webhook's handler, under the event's id) read back from the node taking writes.
 */
async function recordEffects(ledger: Ledger, pair: PostgresPair): Promise<void> {
  const rows = await query<{ key: string }>(
    pair.url(pair.current),
    'SELECT note AS key FROM orders UNION ALL SELECT event_id FROM webhook_effects',
  );
  const at = ledger.history.now();
  for (const row of rows) ledger.history.events.push({ type: 'effect', key: row.key, at });
}

/** How long the drainers get, after the probe, to deliver every staged job. */
const DRAIN_BOUND_MS = 20_000;

/**
 * The staged jobs and their effects: a job for each staged payment a client saw answered 201
 * (its operation completed, so its job was committed with it), each effect row read back from the
 * node taking writes (the authoritative one after failovers) once the jobs table is empty or the
 * drain bound has passed. The effect table has no unique key: a job applied twice shows twice.
 */
async function recordJobs(ledger: Ledger, pair: PostgresPair, keys: string[]): Promise<void> {
  const url = pair.url(pair.current);
  for (const deadline = Date.now() + DRAIN_BOUND_MS; Date.now() < deadline; await sleep(500)) {
    const [{ left }] = await query<{ left: number }>(
      url,
      'SELECT count(*)::int AS left FROM idempotency_records_jobs',
    );
    if (left === 0) break;
  }
  const staged = new Set(keys.filter((_, index) => routeOf(index) === 'staged'));
  const completed = new Set(
    ledger.history.events.flatMap((event) =>
      event.type === 'answer' && event.status === 201 && staged.has(event.key) ? [event.key] : [],
    ),
  );
  const rows = await query<{ ref: string }>(url, 'SELECT ref FROM job_effects');
  const at = ledger.history.now();
  for (const job of completed) ledger.history.events.push({ type: 'job-staged', job, at });
  for (const row of rows) ledger.history.events.push({ type: 'job-effect', job: row.ref, at });
}

/** A lossy proxy in front of each slot; a duplicated copy's answer goes into the history. */
function startProxies(ledger: Ledger, instances: HistoryInstances, rate: number) {
  const slots = Array.from({ length: instances.size }, (_, slot) => slot);
  return Promise.all(
    slots.map((slot) =>
      LossyHttpProxy.start({
        target: () => instances.cluster.url(slot),
        rate,
        now: () => ledger.history.now(),
        onFault: (fault, key) => ledger.history.fault(`proxy ${fault}`, key),
        onDuplicateAnswer: (key, body, startedAt, answer) =>
          ledger.history.answer(
            { key, client: 'proxy-duplicate', startedAt, request: JSON.parse(body.toString()) },
            answer
              ? {
                  status: answer.status,
                  contentType: answer.headers['content-type'],
                  replayed: answer.headers['idempotent-replayed'] === 'true',
                  retryAfter: answer.headers['retry-after'],
                  body: answer.body,
                }
              : {},
          ),
      }),
    ),
  );
}

export async function runRound(
  ledger: Ledger,
  counts: WorkloadCounts,
  options: RoundOptions,
): Promise<void> {
  const { log, round } = options;
  log(`round ${round}: creating a ${options.replication} primary and replica`);
  const creating = PostgresPair.create(options.replication);
  let endpoint: MovingEndpoint | undefined;
  let instances: HistoryInstances | undefined;
  let faults: Promise<void> | undefined;
  let interrupted = false;
  // Interrupted: the apps and the clusters go (the clusters outlive this process), once a fault
  // under way has ended, so a failover cannot start a standby again in a removed folder.
  const unregister = onInterrupt(async () => {
    interrupted = true;
    await instances?.stopAll();
    await faults?.catch(() => undefined);
    await endpoint?.close();
    await (await creating).remove();
  });
  const pair = await creating.catch((error) => {
    unregister();
    throw error;
  });
  const provider = await startProvider(ledger);
  let proxies: LossyHttpProxy[] = [];
  try {
    endpoint = await MovingEndpoint.start(pair.primaryPort);
    const databaseUrl = `postgres://postgres@127.0.0.1:${endpoint.port}/postgres`;
    const env = { databaseUrl, providerUrl: provider.url };
    instances = new HistoryInstances(ledger, `r${round}`, env, log);
    await instances.start();
    proxies = await startProxies(ledger, instances, options.proxyRate);
    await pair.waitForReplica();
    log(`round ${round}: ${instances.size} instances up, workload for ${options.workloadMs} ms`);

    const untilMs = Date.now() + options.workloadMs;
    const plan = { prefix: `r${round}`, untilMs, retryWindowMs: RETRY_WINDOW_MS };
    const workload = runWorkload(ledger, counts, proxies, { ...plan, workers: options.workers });
    const webhooks = sendWebhooks(ledger, counts, proxies, { ...plan, workers: 2 });
    const context = { ledger, instances, pair, endpoint, log, interrupted: () => interrupted };
    faults = injectFaults(context, { untilMs, failovers: options.failovers });
    await faults;
    const keys = await workload;
    const events = await webhooks;

    log(
      `round ${round}: ${keys.length} keys and ${events.length} webhook events sent; settling for ${LEASE_SECONDS + 1} s`,
    );
    for (const proxy of proxies) proxy.rate = 0;
    await sleep((LEASE_SECONDS + 1) * 1000);
    await probeKeys(ledger, counts, proxies, keys, RETRY_WINDOW_MS);
    await probeWebhooks(ledger, counts, proxies, events, RETRY_WINDOW_MS);
    await recordEffects(ledger, pair);
    await recordJobs(ledger, pair, keys);
    for (const exit of instances.unexpectedExits) log(`unexpected exit: ${exit}`);
    // What the apps' exception handler logged: the cause of any 5xx without a code.
    for (const error of instances.cluster.unhandledErrors()) log(`the apps logged ${error}`);
    log(`round ${round}: probed every key`);
  } finally {
    await instances?.stopAll();
    for (const proxy of proxies) await proxy.close();
    await provider.close();
    await endpoint?.close();
    await pair.remove();
    unregister();
    log(`round ${round}: clusters removed`);
  }
}
