import { AppCluster } from '../app-cluster';
import { ChaosClient, isFinal } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { MISBEHAVING, paymentPlan } from '../key-plan';
import { mapLimit } from '../map-limit';
import { appEnv, finishScenario } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';

/** Provider latency during the storm: long enough for bursts to overlap a running handler. */
const STORM_PROVIDER_LATENCY_MS = 50;

/** Every tenth key is declined, fails once, or times out once (SPEC §10's customers). */
function customerFor(index: number): string | undefined {
  switch (index % 10) {
    case 7:
      return MISBEHAVING.declined;
    case 8:
      return MISBEHAVING.unavailableOnce;
    case 9:
      return MISBEHAVING.timeoutOnce;
    default:
      return undefined;
  }
}

/**
 * Storms: N keys × M concurrent requests each, split evenly across the two processes. A key
 * whose burst got no final answer (all 409, or the provider's one-off 503/504) is retried by
 * its client until it does. Then every key must hold one payment and one charge (none when
 * declined), and replay the bytes its clients got.
 */
export async function runStorm(context: ScenarioContext): Promise<ScenarioResult> {
  const startedAt = Date.now();
  const { sizes, adapters } = context.options;
  const cluster = new AppCluster(
    appEnv(context, { PROVIDER_LATENCY_MS: String(STORM_PROVIDER_LATENCY_MS) }),
    adapters,
  );
  const client = new ChaosClient(cluster);
  try {
    await cluster.start();
    const plans = Array.from({ length: sizes.stormKeys }, (_, index) =>
      paymentPlan(`acct_storm_${index % 5}`, `storm-${context.tag}-${index}`, {
        customerId: customerFor(index),
        amount: 100 + index,
      }),
    );
    context.log(
      `storm: ${plans.length} keys x ${sizes.stormRequestsPerKey} concurrent requests ` +
        `(${cluster.size} processes, ${sizes.stormParallelKeys} keys at a time)`,
    );
    let retried = 0;
    await mapLimit(plans, sizes.stormParallelKeys, async (plan) => {
      const burst = await Promise.all(
        Array.from({ length: sizes.stormRequestsPerKey }, (_, index) =>
          client.send(index % cluster.size, plan.request, 'storm'),
        ),
      );
      if (burst.some((exchange) => isFinal(exchange.status))) return;
      retried++;
      await client.sendUntilFinal(plan.request, {
        firstSlot: 0,
        deadlineMs: 30_000,
        maxRetryDelayMs: 1000,
        phase: 'storm-retry',
      });
    });
    const loadRequests = client.exchanges.length;
    return await finishScenario(context, {
      scenario: 'storm',
      startedAt,
      client,
      cluster,
      plans,
      disruptions: '-',
      details: {
        loadRequests,
        keysRetriedAfterBurst: retried,
        providerLatencyMs: STORM_PROVIDER_LATENCY_MS,
        adapters: [...adapters],
      },
    });
  } finally {
    await cluster.stopAll();
  }
}
