/**
 * One round of the history run: a fresh primary and streaming replica, an Express and a Fastify
 * instance behind the moving endpoint, the workload with one failover in its middle (the standby
 * stalls first), a settle period, a probe of every key, and the local effects read back. The
 * clusters are removed when the round ends, and by the interrupt handler if it is cut short.
 */
import { onInterrupt } from '../emergency-cleanup';
import { MovingEndpoint } from '../failover/moving-endpoint';
import { PostgresPair, query } from '../failover/postgres-pair';
import type { Replication } from '../failover/postgres-pair';
import { LEASE_SECONDS, startInstance } from './history-app';
import type { HistoryInstance, Ledger } from './history-app';
import { probeKeys, runWorkload } from './history-workload';
import type { WorkloadCounts } from './history-workload';

export interface RoundOptions {
  round: number;
  replication: Replication;
  workloadMs: number;
  workers: number;
  log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How long the standby stays stopped before the failover: commits made then wait for it. */
const STALL_MS = 1_500;
/** How long a client retries one key before it gives up. */
const RETRY_WINDOW_MS = 30_000;

/**
 * The fault: the standby stalls (stopped), then the primary crashes, the standby is started and
 * promoted, and the endpoint moves to it.
 */
async function failOver(pair: PostgresPair, endpoint: MovingEndpoint, options: RoundOptions) {
  options.log(`round ${options.round}: the standby stalls`);
  await pair.stop('replica', 'immediate');
  await sleep(STALL_MS);
  options.log(`round ${options.round}: the primary crashes, the standby is promoted`);
  await pair.failOver();
  endpoint.moveTo(pair.replicaPort);
  options.log(`round ${options.round}: the endpoint moved to the promoted standby`);
}

/** Each order row (a transactional handler's effect) read back from the surviving primary. */
async function recordEffects(ledger: Ledger, pair: PostgresPair): Promise<void> {
  const rows = await query<{ note: string }>(pair.url('replica'), 'SELECT note FROM orders');
  const at = ledger.history.now();
  for (const row of rows) ledger.history.events.push({ type: 'effect', key: row.note, at });
}

export async function runRound(
  ledger: Ledger,
  counts: WorkloadCounts,
  faults: Record<string, number>,
  options: RoundOptions,
): Promise<void> {
  const { log, round } = options;
  log(`round ${round}: creating a ${options.replication} primary and replica`);
  const creating = PostgresPair.create(options.replication);
  let endpoint: MovingEndpoint | undefined;
  let fault: Promise<void> | undefined;
  let interrupted = false;
  const instances: HistoryInstance[] = [];
  // Interrupted: the clusters go first (they outlive this process), once a failover under way
  // has ended, so it cannot start the standby again in a removed folder; the apps die with us.
  const unregister = onInterrupt(async () => {
    interrupted = true;
    await fault?.catch(() => undefined);
    await endpoint?.close();
    await (await creating).remove();
  });
  const pair = await creating.catch((error) => {
    unregister();
    throw error;
  });
  try {
    endpoint = await MovingEndpoint.start(pair.primaryPort);
    const url = `postgres://postgres@127.0.0.1:${endpoint.port}/postgres`;
    // One after the other: both run the migrations.
    instances.push(await startInstance(`r${round}-express`, 'express', url, ledger));
    instances.push(await startInstance(`r${round}-fastify`, 'fastify', url, ledger));
    await pair.waitForReplica();
    log(`round ${round}: ${instances.length} instances up, workload for ${options.workloadMs} ms`);

    const untilMs = Date.now() + options.workloadMs;
    const workload = runWorkload(ledger, counts, instances, {
      prefix: `r${round}`,
      workers: options.workers,
      untilMs,
      retryWindowMs: RETRY_WINDOW_MS,
    });
    await sleep(options.workloadMs / 2 - STALL_MS);
    if (interrupted) return;
    fault = failOver(pair, endpoint, options);
    await fault;
    faults.failover++;
    faults['standby stall']++;
    const keys = await workload;

    log(`round ${round}: ${keys.length} keys sent; settling for ${LEASE_SECONDS + 1} s`);
    await sleep((LEASE_SECONDS + 1) * 1000);
    await probeKeys(ledger, counts, instances, keys, RETRY_WINDOW_MS);
    await recordEffects(ledger, pair);
    log(`round ${round}: probed every key`);
  } finally {
    for (const instance of instances) await instance.app.close().catch(() => undefined);
    await endpoint?.close();
    await pair.remove();
    unregister();
    log(`round ${round}: clusters removed`);
  }
}
