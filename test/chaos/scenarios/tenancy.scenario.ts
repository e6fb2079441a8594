import { AppCluster } from '../app-cluster';
import { ChaosClient, isFinal } from '../chaos-client';
import type { Exchange } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { paymentPlan, refundPlan } from '../key-plan';
import type { KeyPlan } from '../key-plan';
import { mapLimit } from '../map-limit';
import { appEnv, finishScenario } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';

/** Slot 1 answers slowly, so a race of two accounts on one key overlaps a running handler. */
const SLOW_SLOT_LATENCY_MS = 300;

const retry = (firstSlot: number, phase: string) => ({
  firstSlot,
  deadlineMs: 30_000,
  maxRetryDelayMs: 1000,
  phase,
});

/** Payment, charge and refund ids in a response body. */
function idsIn(exchange: Exchange): string[] {
  return [...new Set(exchange.body.toString('utf8').match(/\b(pay|ch|re)_[0-9a-f]{24}\b/g))];
}

/** A's identifiers found in a body, ignoring those the request itself named (its path). */
function leakedIds(exchange: Exchange, victimIds: Set<string>): string[] {
  return idsIn(exchange).filter((id) => victimIds.has(id) && !exchange.path.includes(id));
}

/**
 * Tenancy: account A makes payments and refunds; then account B — and accounts whose ids only
 * look like A's — reuse A's keys: same and different bodies, on the payments and the refunds
 * endpoint, on both processes (Express and Fastify), also racing A on a key A is still running.
 * Nobody but A may get A's response, ids, a 409/422 caused by A's key, or change A's records;
 * B's reads of A's payments are 404; and A still replays its own bytes.
 */
export async function runTenancy(context: ScenarioContext): Promise<ScenarioResult> {
  const startedAt = Date.now();
  const { sizes, adapters } = context.options;
  const cluster = new AppCluster(appEnv(context), adapters);
  const client = new ChaosClient(cluster);
  const leaks: string[] = [];
  const failures: string[] = [];
  const victim = `acct_a_${context.tag}`;
  const intruder = `acct_b_${context.tag}`;
  // Accounts that differ from A only in case, by a suffix, or as a joined header value.
  const lookalikes = [victim.toUpperCase(), `${victim}_`, `${victim}, ${intruder}`];
  const plans: KeyPlan[] = [];
  try {
    await cluster.start([
      { PROVIDER_LATENCY_MS: '0' },
      { PROVIDER_LATENCY_MS: String(SLOW_SLOT_LATENCY_MS) },
    ]);
    context.log(`tenancy: ${sizes.tenancyKeys} keys of ${victim} reused by other accounts`);

    // A's payments and refunds.
    const victimPlans = Array.from({ length: sizes.tenancyKeys }, (_, i) =>
      paymentPlan(victim, `tenancy-${context.tag}-${i}`, { amount: 1000 + i }),
    );
    const victimPayments = await mapLimit(victimPlans, 8, async (plan, i) => {
      const { final } = await client.sendUntilFinal(plan.request, retry(i, 'victim'));
      return final?.status === 201 ? JSON.parse(final.body.toString('utf8')) : undefined;
    });
    plans.push(...victimPlans);
    const refundPlans = victimPlans.flatMap((plan, i) =>
      victimPayments[i]
        ? [refundPlan(victim, `${plan.key}-refund`, victimPayments[i].id, 100, 'refund')]
        : [],
    );
    await mapLimit(refundPlans, 8, (plan, i) =>
      client.sendUntilFinal(plan.request, retry(i + 1, 'victim')),
    );
    plans.push(...refundPlans);
    const victimRecords = await recordsOf(context, victim);
    const victimIds = new Set(client.exchanges.flatMap(idsIn));
    const victimBodies = new Set(
      client.exchanges
        .filter((exchange) => isFinal(exchange.status))
        .map((e) => e.body.toString('base64')),
    );

    // B reuses A's keys, four ways, alternating processes.
    const intruderPlans: KeyPlan[] = [];
    victimPlans.forEach((plan, i) => {
      const payment = victimPayments[i];
      const refundKey = `${plan.key}-refund`;
      switch (i % 4) {
        case 0: // the same key with A's exact body
          intruderPlans.push({
            ...plan,
            account: intruder,
            request: { ...plan.request, account: intruder },
          });
          break;
        case 1: // the same key with another body
          intruderPlans.push(paymentPlan(intruder, plan.key, { amount: 5000 + i }));
          break;
        case 2: // A's payment key on the refunds endpoint of A's payment
          if (payment)
            intruderPlans.push(refundPlan(intruder, plan.key, payment.id, 100, 'not_found'));
          break;
        default: // A's refund key, with A's refund body, on A's payment
          if (payment) {
            intruderPlans.push(refundPlan(intruder, refundKey, payment.id, 100, 'not_found'));
          }
      }
      if (i % 4 !== 3) intruderPlans.push(paymentPlan(intruder, refundKey, { amount: 7000 + i }));
    });
    // Lookalike accounts replay A's first key with A's exact body.
    for (const account of lookalikes) {
      intruderPlans.push({
        ...victimPlans[0],
        account,
        request: { ...victimPlans[0].request, account },
      });
    }
    await mapLimit(intruderPlans, 8, (plan, i) =>
      client.sendUntilFinal(plan.request, retry(i + 1, 'intruder')),
    );
    plans.push(...intruderPlans);

    // Races: A and B send the same new key at the same moment to the slow process.
    const raceCount = Math.max(2, Math.floor(sizes.tenancyKeys / 2));
    await mapLimit(
      Array.from({ length: raceCount }, (_, i) => i),
      4,
      async (i) => {
        const key = `tenancy-${context.tag}-race-${i}`;
        const ours = paymentPlan(victim, key, { amount: 300 + i });
        const theirs = paymentPlan(intruder, key, { amount: 300 + i });
        plans.push(ours, theirs);
        await Promise.all([
          client.sendUntilFinal(ours.request, retry(1, 'race')),
          client.sendUntilFinal(theirs.request, retry(1, 'race')),
        ]);
      },
    );

    // B reads A's payments and refunds, on both processes.
    for (let slot = 0; slot < cluster.size; slot++) {
      for (const payment of victimPayments.filter(Boolean)) {
        for (const path of [`/payments/${payment.id}`, `/payments/${payment.id}/refunds`]) {
          const read = await client.send(slot, { method: 'GET', path, account: intruder }, 'read');
          if (read.status !== 404)
            leaks.push(`GET ${path} as ${intruder} on slot ${slot} answered ${read.status}`);
        }
      }
      const list = await client.send(
        slot,
        { method: 'GET', path: '/payments', account: intruder },
        'read',
      );
      const ids = leakedIds(list, victimIds);
      if (list.status !== 200)
        failures.push(`GET /payments as ${intruder} answered ${list.status}`);
      if (ids.length > 0) leaks.push(`GET /payments as ${intruder} lists ${ids.join(', ')}`);
    }

    // Nothing anyone else got may carry A's response or ids, or reveal A's key state.
    const firstSeen = new Set<string>();
    for (const exchange of client.exchanges) {
      if (exchange.account === victim) continue;
      const name = `${exchange.account}/${exchange.key ?? exchange.path} (slot ${exchange.slot})`;
      const ids = leakedIds(exchange, victimIds);
      if (ids.length > 0) leaks.push(`${name} got A's ids ${ids.join(', ')}`);
      else if (exchange.key && victimBodies.has(exchange.body.toString('base64'))) {
        leaks.push(`${name} got one of A's responses byte for byte`);
      }
      if (exchange.key === undefined) continue;
      const id = `${exchange.account}\u0000${exchange.key}`;
      if (firstSeen.has(id)) continue;
      firstSeen.add(id);
      if (exchange.replayed || exchange.status === 409 || exchange.status === 422) {
        leaks.push(
          `${name}: its first request answered ${exchange.replayed ? 'a replay of ' : ''}` +
            `${exchange.status} (A's use of the key is visible)`,
        );
      }
    }
    const after = await recordsOf(context, victim);
    for (const [key, row] of victimRecords) {
      if (after.get(key) !== row)
        leaks.push(`A's record ${key} changed: ${row} -> ${after.get(key)}`);
    }

    return await finishScenario(context, {
      scenario: 'tenancy',
      startedAt,
      client,
      cluster,
      plans,
      disruptions: '-',
      details: {
        victim,
        intruders: [intruder, ...lookalikes],
        reuseAttempts: intruderPlans.length,
        races: raceCount,
      },
      extra: { leaks, failures },
    });
  } finally {
    await cluster.stopAll();
  }
}

/** A's records, serialized row by row, to show nothing else changed them. */
async function recordsOf(context: ScenarioContext, account: string): Promise<Map<string, string>> {
  const rows = await context.db.query(
    'SELECT * FROM idempotency_records WHERE scope = $1 ORDER BY idempotency_key',
    [account],
  );
  return new Map(rows.map((row) => [row.idempotency_key, JSON.stringify(row)]));
}
