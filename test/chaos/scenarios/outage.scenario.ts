import { AppCluster } from '../app-cluster';
import { ChaosClient } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { onInterrupt } from '../emergency-cleanup';
import { paymentPlan } from '../key-plan';
import type { KeyPlan } from '../key-plan';
import { DatabaseOutage } from '../outage-window';
import { findLocalCluster } from '../postgres-control';
import { appEnv, finishScenario, sleep, tallyStatuses } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';

/** Provider latency during the outage: handlers are running when the database goes away. */
const OUTAGE_PROVIDER_LATENCY_MS = 100;
/** Load before the outage and after the database is back. */
const LOAD_BEFORE_MS = 1500;
const LOAD_AFTER_MS = 3000;
/** How long a process may take to serve a new key again once the database is back. */
const RECOVERY_DEADLINE_MS = 20_000;

/**
 * Database outage: clients keep sending new keys to both processes while the database goes
 * away (full: PostgreSQL stopped; quick: the scenario's database refuses connections and the
 * app's connections are terminated) and comes back. While it is down every 5xx must be 503
 * problem+json; afterwards both processes, never restarted, must serve new keys again, and no
 * key may be duplicated, lost or stuck.
 */
export async function runOutage(context: ScenarioContext): Promise<ScenarioResult> {
  const startedAt = Date.now();
  const { sizes, adapters, quick, serverUrl } = context.options;
  const cluster = new AppCluster(
    appEnv(context, { PROVIDER_LATENCY_MS: String(OUTAGE_PROVIDER_LATENCY_MS) }),
    adapters,
  );
  const client = new ChaosClient(cluster);
  const plans: KeyPlan[] = [];
  const failures: string[] = [];
  // The full run stops the whole local server; elsewhere (or in quick mode) only the
  // scenario's database is cut off.
  const localCluster = quick ? undefined : await findLocalCluster(serverUrl);
  const mode = localCluster ? 'server-stop' : 'connections-cut';
  const databaseOutage = new DatabaseOutage({
    mode,
    serverUrl,
    database: context.db.name,
    cluster: localCluster,
    downMs: sizes.outageSeconds * 1000,
    now: () => client.now(),
  });
  const unregister = onInterrupt(() => databaseOutage.restore());
  try {
    await cluster.start();
    const pids = Array.from({ length: cluster.size }, (_, slot) => cluster.pid(slot));
    context.log(
      `outage: ${sizes.outageClients} clients, database down ${sizes.outageSeconds} s (${mode}` +
        `${localCluster ? `: PostgreSQL ${localCluster.version}/${localCluster.name} stops` : ''})`,
    );
    let loadOver = false;
    let counter = 0;
    const worker = async (index: number) => {
      while (!loadOver) {
        const plan = paymentPlan(`acct_outage_${index % 4}`, `outage-${context.tag}-${counter++}`, {
          amount: 100 + index,
        });
        plans.push(plan);
        await client.sendUntilFinal(plan.request, {
          firstSlot: index,
          deadlineMs: 60_000,
          maxRetryDelayMs: 1000,
          phase: 'outage',
        });
      }
    };
    const load = Promise.all(Array.from({ length: sizes.outageClients }, (_, i) => worker(i)));
    await sleep(LOAD_BEFORE_MS);
    const outage = await databaseOutage.run();
    await sleep(LOAD_AFTER_MS);
    loadOver = true;
    await load;

    // Recovery: each process, never restarted, serves new keys again without help. Measured
    // from the load (first new payment a process answered after the database was back), then
    // confirmed with one more brand-new key per process.
    const back = outage.upAt;
    const recovery: Record<string, number | null> = {};
    for (let slot = 0; slot < cluster.size; slot++) {
      const firstSuccess = client.exchanges.find(
        (exchange) =>
          exchange.slot === slot &&
          exchange.status === 201 &&
          !exchange.replayed &&
          exchange.startedAt >= back,
      );
      recovery[`slot${slot}`] = firstSuccess ? firstSuccess.endedAt - back : null;
      const plan = paymentPlan('acct_outage_probe', `outage-${context.tag}-probe-${slot}`);
      plans.push(plan);
      const probeStarted = Date.now();
      let answered = false;
      while (!answered && Date.now() - probeStarted < RECOVERY_DEADLINE_MS) {
        const exchange = await client.send(slot, plan.request, 'recovery');
        answered = exchange.status === 201;
        if (!answered) await sleep(200);
      }
      if (!answered) failures.push(`slot ${slot} did not serve a new key again after the outage`);
      if (cluster.pid(slot) !== pids[slot]) failures.push(`slot ${slot} was restarted`);
    }

    // Statuses of requests that overlapped the outage, and of those sent and answered while
    // the database was certainly unreachable (only 503 problem+json is acceptable there).
    const overlapping = client.exchanges.filter(
      (exchange) => exchange.endedAt >= outage.downAt && exchange.startedAt <= back,
    );
    const whileDown = overlapping.filter(
      (exchange) =>
        exchange.startedAt >= outage.fullyDownAt && exchange.endedAt <= outage.restoringAt,
    );
    return await finishScenario(context, {
      scenario: 'outage',
      startedAt,
      client,
      cluster,
      plans,
      allowStoreUnavailable: true,
      disruptions: `1 outage ${((outage.restoringAt - outage.fullyDownAt) / 1000).toFixed(1)}s`,
      details: {
        mode,
        window: outage,
        statusesOverlappingOutage: tallyStatuses(overlapping),
        statusesWhileDown: tallyStatuses(whileDown),
        recoveryMsAfterDatabaseBack: recovery,
        providerLatencyMs: OUTAGE_PROVIDER_LATENCY_MS,
      },
      extra: { failures },
    });
  } finally {
    // The database is back whatever happened (run() restores it too; this is idempotent).
    await databaseOutage.restore();
    unregister();
    await cluster.stopAll();
  }
}
