/**
 * One round of the history run: a fresh primary and streaming replica, an Express and a Fastify
 * instance (child processes) behind the moving endpoint, each reached by clients through a lossy
 * proxy, the workload with faults injected (`injectFaults`: kills, pauses, cut connections,
 * failovers), a settle period, a probe of every key, and the local effects read back. The
 * clusters are removed when the round ends, and by the interrupt handler if it is cut short.
 */
import { onInterrupt } from '../emergency-cleanup';
import { MovingEndpoint } from '../failover/moving-endpoint';
import { PostgresPair, query } from '../failover/postgres-pair';
import type { Replication } from '../failover/postgres-pair';
import { injectFaults } from './history-faults';
import { HistoryInstances, LEASE_SECONDS, startProvider } from './history-instances';
import type { Ledger } from './history-instances';
import { probeKeys, runWorkload } from './history-workload';
import type { WorkloadCounts } from './history-workload';
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

/** Each order row (a transactional handler's effect) read back from the node taking writes. */
async function recordEffects(ledger: Ledger, pair: PostgresPair): Promise<void> {
  const rows = await query<{ note: string }>(pair.url(pair.current), 'SELECT note FROM orders');
  const at = ledger.history.now();
  for (const row of rows) ledger.history.events.push({ type: 'effect', key: row.note, at });
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
    const workload = runWorkload(ledger, counts, proxies, {
      prefix: `r${round}`,
      workers: options.workers,
      untilMs,
      retryWindowMs: RETRY_WINDOW_MS,
    });
    const context = { ledger, instances, pair, endpoint, log, interrupted: () => interrupted };
    faults = injectFaults(context, { untilMs, failovers: options.failovers });
    await faults;
    const keys = await workload;

    log(`round ${round}: ${keys.length} keys sent; settling for ${LEASE_SECONDS + 1} s`);
    for (const proxy of proxies) proxy.rate = 0;
    await sleep((LEASE_SECONDS + 1) * 1000);
    await probeKeys(ledger, counts, proxies, keys, RETRY_WINDOW_MS);
    await recordEffects(ledger, pair);
    for (const exit of instances.unexpectedExits) log(`unexpected exit: ${exit}`);
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
