import type { SampleHttpAdapter } from '../../../sample-app/config/sample-app.config';
import { findPgBouncer, startPgBouncer } from '../../fixtures/pgbouncer';
import type { PgBouncer } from '../../fixtures/pgbouncer';
import { AppCluster } from '../app-cluster';
import { ChaosClient } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { paymentPlan } from '../key-plan';
import type { KeyPlan } from '../key-plan';
import { appEnv, finishScenario, randomInt, sleep } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';

/** Four instances, alternating adapters; the last two reach PostgreSQL through PgBouncer. */
const ADAPTERS: SampleHttpAdapter[] = ['express', 'fastify', 'express', 'fastify'];
const BEHIND_PGBOUNCER = new Set([2, 3]);
/** Keys of a round start at random moments over this window; the kill falls inside it. */
const LOAD_SPREAD_MS = 600;
/** Slow enough that a kill often lands mid-handler. */
const PROVIDER_LATENCY_MS = 100;

/**
 * Scale-out: four sample-app processes on one database, two of them behind a real PgBouncer in
 * transaction pooling mode (`IDEMPOTENCY_PREPARED_STATEMENTS=false`). Each round sends every key
 * from four clients at once, each starting on a different instance (a same-key storm across
 * instances), kills one instance with SIGKILL under that load (every instance in turn, those
 * behind PgBouncer too) and restarts it; clients retry until a final answer. Every key must end
 * with one payment and one charge, replayable, nothing left in flight. Without pgbouncer
 * installed, all four connect directly and the result says so.
 */
export async function runScaleOut(context: ScenarioContext): Promise<ScenarioResult> {
  const startedAt = Date.now();
  const { sizes } = context.options;
  const found = findPgBouncer();
  let bouncer: PgBouncer | undefined;
  // The run's own server (CHAOS_DATABASE_URL, DATABASE_URL or the default), never the env's.
  if ('bin' in found) bouncer = await startPgBouncer(found.bin, 6, context.db.url);
  const route = bouncer
    ? `${bouncer.version}, transaction pooling`
    : `no PgBouncer (${'missing' in found ? found.missing : ''})`;
  const slotEnv = (slot: number): Record<string, string> =>
    bouncer && BEHIND_PGBOUNCER.has(slot)
      ? {
          DATABASE_URL: bouncer.through(context.db.url),
          IDEMPOTENCY_PREPARED_STATEMENTS: 'false',
          PROVIDER_LATENCY_MS: String(PROVIDER_LATENCY_MS),
        }
      : { PROVIDER_LATENCY_MS: String(PROVIDER_LATENCY_MS) };
  const cluster = new AppCluster(appEnv(context), ADAPTERS);
  const client = new ChaosClient(cluster);
  const plans: KeyPlan[] = [];
  const kills: { round: number; slot: number; route: string; pendingRequests: number }[] = [];
  const failures: string[] = [];
  try {
    await cluster.start(ADAPTERS.map((_, slot) => slotEnv(slot)));
    context.log(
      `scaleout: ${sizes.scaleOutRounds} rounds of ${sizes.scaleOutKeysPerRound} keys x 4 ` +
        `instances, one kill -9 per round; ${route}`,
    );
    for (let round = 0; round < sizes.scaleOutRounds; round++) {
      const victim = round % cluster.size;
      const roundPlans = Array.from({ length: sizes.scaleOutKeysPerRound }, (_, index) =>
        paymentPlan(`acct_scale_${index % 3}`, `scale-${context.tag}-r${round}-k${index}`, {
          amount: 200 + index,
        }),
      );
      plans.push(...roundPlans);
      const policy = { deadlineMs: 45_000, maxRetryDelayMs: 1000, phase: `scaleout-r${round}` };
      const load = Promise.all(
        roundPlans.map(async (plan) => {
          await sleep(randomInt(0, LOAD_SPREAD_MS));
          // The same key from four clients at once, each starting on another instance.
          return Promise.all(
            ADAPTERS.map((_, first) =>
              client.sendUntilFinal(plan.request, { ...policy, firstSlot: first }),
            ),
          );
        }),
      );
      await sleep(randomInt(100, LOAD_SPREAD_MS + 100));
      kills.push({
        round,
        slot: victim,
        route: routeOf(victim, bouncer),
        pendingRequests: client.pending(victim),
      });
      await cluster.kill(victim);
      const restart = cluster.restart(victim, slotEnv(victim)).catch((error: unknown) => {
        failures.push(`round ${round}: slot ${victim} did not restart: ${error}`);
      });
      await load;
      await restart;
    }
    const answersBySlot = ADAPTERS.map((adapter, slot) => ({
      slot,
      adapter,
      route: routeOf(slot, bouncer),
      answers: client.exchanges.filter((exchange) => exchange.slot === slot).length,
    }));
    return await finishScenario(context, {
      scenario: 'scaleout',
      startedAt,
      client,
      cluster,
      plans,
      allowTransportErrors: true,
      disruptions: `${kills.length} kills`,
      details: {
        pgbouncer: route,
        instances: answersBySlot,
        kills,
      },
      extra: { failures },
    });
  } finally {
    await cluster.stopAll();
    await bouncer?.stop();
  }
}

function routeOf(slot: number, bouncer: PgBouncer | undefined): string {
  return bouncer && BEHIND_PGBOUNCER.has(slot) ? 'pgbouncer' : 'direct';
}
