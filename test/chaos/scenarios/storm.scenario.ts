import { AppCluster } from '../app-cluster';
import { ChaosClient, isFinal } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { MISBEHAVING, paymentPlan } from '../key-plan';
import { mapLimit } from '../map-limit';
import { appEnv, finishScenario, randomInt, sleep } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';

/** Provider latency during the storm: long enough for bursts to overlap a running handler. */
const STORM_PROVIDER_LATENCY_MS = 50;

/** Every tenth request of a burst hangs up while the handler runs, as a client that times out. */
const HANG_UP_EVERY = 10;

/**
 * On every fifth key (well-behaved customers only) the first request goes ahead of its burst,
 * wins the claim, and hangs up mid-handler: the key must not be freed, so it runs exactly once.
 */
const isOwnerHangUpKey = (index: number) => index % 5 === 1;
const OWNER_HANG_UP_AFTER_MS = 20;

/** Every tenth key is declined, fails once, or times out once (the sample's misbehaving customers, docs/sample-app.md#the-fake-provider). */
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
 * Storms: N keys × M concurrent requests each, split evenly across the two processes; every
 * tenth request of a burst hangs up before its answer (its handler may still be running), and on
 * every fifth key the owner itself hangs up mid-handler. A key
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
    await mapLimit(plans, sizes.stormParallelKeys, async (plan, index) => {
      let ownerHungUp: Promise<unknown> = Promise.resolve();
      if (isOwnerHangUpKey(index)) {
        ownerHungUp = client.send(0, plan.request, 'storm-owner-hang-up', OWNER_HANG_UP_AFTER_MS);
        await sleep(5);
      }
      const burst = await Promise.all(
        Array.from({ length: sizes.stormRequestsPerKey }, (_, index) =>
          index % HANG_UP_EVERY === 3
            ? client.send(
                index % cluster.size,
                plan.request,
                'storm-hang-up',
                randomInt(5, STORM_PROVIDER_LATENCY_MS + 20),
              )
            : client.send(index % cluster.size, plan.request, 'storm'),
        ),
      );
      await ownerHungUp;
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
    // A second attempt on a key whose owner hung up means the key was freed while its handler
    // still ran (its customer never fails, so nothing else would release it).
    const ranTwice = await context.db.query<{ idempotency_key: string; attempts: number }>(
      `SELECT idempotency_key, attempts FROM idempotency_records
        WHERE idempotency_key = ANY($1) AND attempts > 1`,
      [plans.filter((_, index) => isOwnerHangUpKey(index)).map((plan) => plan.key)],
    );
    return await finishScenario(context, {
      scenario: 'storm',
      startedAt,
      client,
      cluster,
      plans,
      disruptions: '-',
      extra: {
        duplicates: ranTwice.map(
          (row) =>
            `${row.idempotency_key}: its owner hung up mid-handler and the key ran ` +
            `${row.attempts} times`,
        ),
      },
      details: {
        loadRequests,
        ownerHangUpKeys: plans.filter((_, index) => isOwnerHangUpKey(index)).length,
        hungUp: client.exchanges.filter((exchange) => exchange.hungUp).length,
        keysRetriedAfterBurst: retried,
        providerLatencyMs: STORM_PROVIDER_LATENCY_MS,
        adapters: [...adapters],
      },
    });
  } finally {
    await cluster.stopAll();
  }
}
