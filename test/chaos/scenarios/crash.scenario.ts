import { AppCluster } from '../app-cluster';
import { ChaosClient } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { paymentPlan } from '../key-plan';
import type { KeyPlan } from '../key-plan';
import { appEnv, finishScenario, randomInt, sleep } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';

/** What one `kill -9` hit. */
interface KillRecord {
  round: number;
  slot: number;
  adapter: string;
  /** Provider latency of the killed process. */
  providerLatencyMs: number;
  /** When it was killed, after the round's load started. */
  delayMs: number;
  /** Requests the killed process had not answered yet. */
  pendingRequests: number;
  /** Records in flight (live lease) at the moment of the kill, on any process. */
  inFlightRecords: number;
  /** How long the restarted process took to answer `/health`. */
  restartMs?: number;
  /** From the kill to the last final answer of the round's keys (bounded by the lease). */
  lastAnswerAfterKillMs?: number;
}

/** Keys of a round start at random moments over this window; the kill falls inside it. */
const LOAD_SPREAD_MS = 800;

/** Half the rounds kill a process whose provider is slow, so the kill lands mid-handler. */
function latencyOfRound(round: number): number {
  return round % 4 < 2 ? randomInt(200, 500) : randomInt(0, 40);
}

/**
 * Crashes: rounds of `kill -9` of one process (alternating) at a random moment while clients
 * send keys to both, the process restarted at once, and every client retrying its key (the
 * same key, `Retry-After` honoured) until it gets a final answer. Every key must end replayable
 * with one payment and one charge, and no record may stay in flight after its lease.
 */
export async function runCrash(context: ScenarioContext): Promise<ScenarioResult> {
  const startedAt = Date.now();
  const { sizes, adapters } = context.options;
  const cluster = new AppCluster(appEnv(context), adapters);
  const client = new ChaosClient(cluster);
  const kills: KillRecord[] = [];
  const plans: KeyPlan[] = [];
  const failures: string[] = [];
  try {
    const latencies = Array.from({ length: sizes.crashRounds + 2 }, (_, r) => latencyOfRound(r));
    await cluster.start(
      latencies.slice(0, cluster.size).map((ms) => ({ PROVIDER_LATENCY_MS: String(ms) })),
    );
    context.log(
      `crash: ${sizes.crashRounds} rounds of kill -9, ${sizes.crashKeysPerRound} keys each`,
    );
    for (let round = 0; round < sizes.crashRounds; round++) {
      const victim = round % cluster.size;
      const roundPlans = Array.from({ length: sizes.crashKeysPerRound }, (_, index) =>
        paymentPlan(`acct_crash_${index % 3}`, `crash-${context.tag}-r${round}-k${index}`, {
          amount: 100 + index,
        }),
      );
      plans.push(...roundPlans);
      const policy = { deadlineMs: 45_000, maxRetryDelayMs: 1000, phase: `crash-r${round}` };
      // Keys arrive over LOAD_SPREAD_MS, so the kill lands under load. Two clients per key:
      // one starts on the victim, the other a moment later on a survivor.
      const load = Promise.all(
        roundPlans.map(async (plan) => {
          await sleep(randomInt(0, LOAD_SPREAD_MS));
          return Promise.all([
            client.sendUntilFinal(plan.request, { ...policy, firstSlot: victim }),
            sleep(randomInt(20, 150)).then(() =>
              client.sendUntilFinal(plan.request, { ...policy, firstSlot: victim + 1 }),
            ),
          ]);
        }),
      );
      const latency = latencies[round];
      const delayMs = randomInt(100, LOAD_SPREAD_MS + 100);
      await sleep(delayMs);
      const kill: KillRecord = {
        round,
        slot: victim,
        adapter: cluster.adapter(victim),
        providerLatencyMs: latency,
        delayMs,
        pendingRequests: client.pending(victim),
        inFlightRecords: (
          await context.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM idempotency_records
              WHERE status = 'in_flight' AND locked_until > now()`,
          )
        )[0].n,
      };
      kills.push(kill);
      const killedAt = client.now();
      await cluster.kill(victim);
      const restartStarted = Date.now();
      const restart = cluster
        .restart(victim, { PROVIDER_LATENCY_MS: String(latencies[round + cluster.size]) })
        .then(() => (kill.restartMs = Date.now() - restartStarted))
        .catch((error: unknown) => {
          failures.push(`round ${round}: slot ${victim} did not restart: ${error}`);
        });
      const answers = await load;
      kill.lastAnswerAfterKillMs =
        Math.max(...answers.flat().map((answer) => answer.final?.endedAt ?? Infinity)) - killedAt;
      await restart;
    }
    const midHandler = kills.filter((kill) => kill.pendingRequests > 0).length;
    return await finishScenario(context, {
      scenario: 'crash',
      startedAt,
      client,
      cluster,
      plans,
      allowTransportErrors: true,
      disruptions: `${kills.length} kills`,
      details: {
        killsWithPendingRequests: midHandler,
        killsWithLiveLeases: kills.filter((kill) => kill.inFlightRecords > 0).length,
        slowestLastAnswerAfterKillMs: Math.max(
          ...kills.map((kill) => kill.lastAnswerAfterKillMs ?? 0),
        ),
        kills,
      },
      extra: { failures },
    });
  } finally {
    await cluster.stopAll();
  }
}
