import { AppCluster } from '../app-cluster';
import { ChaosClient, isFinal, statusLabel } from '../chaos-client';
import type { Exchange } from '../chaos-client';
import type { ScenarioResult } from '../chaos-result';
import { chargeKeyOf } from '../database-snapshot';
import { paymentPlan, planId } from '../key-plan';
import type { KeyPlan } from '../key-plan';
import { appEnv, buildResult, sleep } from '../scenario-support';
import type { ScenarioContext } from '../scenario-support';
import { verifyKeys } from '../verify-keys';

/**
 * The sample's crash hooks (`SAMPLE_CRASH_AT`), in the order each round runs them.
 * `after_job_taken` comes first: its crasher must be the only process that drains jobs, and the
 * drainer that delivers the receipts at the end is started only after the last one.
 */
const HOOKS = [
  'after_job_taken',
  'after_payment_created',
  'after_charge_before_record',
  'after_charged',
] as const;
type Hook = (typeof HOOKS)[number];

/** Two survivors (one per adapter) serve the retries and run the completer; they drain no job. */
const SURVIVORS = [0, 1] as const;
/** The crasher of each hook runs in one of these (one per adapter), one at a time. */
const CRASH_SLOTS = [2, 3] as const;
/** Started after the last `after_job_taken` crash, to deliver every receipt left. */
const DRAINER_SLOT = 4;

/** The crasher's provider is slow, so the other keys are still in flight when one crashes it. */
const CRASHER_PROVIDER_LATENCY_MS = 300;
/**
 * The completer on every process, every 0.2 s, for records last run half a second more than a
 * lease ago: it races the retrying clients (which take over once the lease lapsed) and each
 * finishes some of those keys; the keys nobody retries are its alone.
 */
const completerEnv = (leaseSeconds: number) => ({
  IDEMPOTENCY_COMPLETER_INTERVAL_SECONDS: '0.2',
  IDEMPOTENCY_COMPLETER_AFTER_SECONDS: String(leaseSeconds + 0.5),
});
/** Jobs interval of the crashers and the drainer. */
const FAST_DRAIN_SECONDS = '0.1';
/** Jobs interval of the survivors: longer than the run, so they never drain (see HOOKS). */
const NO_DRAIN_SECONDS = '3600';

/** How long a crasher may take to reach its hook. */
const CRASH_TIMEOUT_MS = 10_000;
/** How long the completer, the clients and the drainer get to finish everything after the load. */
const SETTLE_TIMEOUT_MS = 30_000;

/** One key of the scenario. */
interface PhaseKey {
  plan: KeyPlan;
  round: number;
  hook: Hook;
  /** `retry`: the client retries on a survivor until final; `none`: it sends once. */
  client: 'retry' | 'none';
  /** The key starts with the crasher's `SAMPLE_CRASH_KEY_PREFIX`. */
  crashes: boolean;
  /** Its record when the crasher died: `status@recovery_point`, or `none`. */
  atCrash?: string;
  /** What its client was last told during the load (`err`, `201`, `r201`…). */
  clientAnswer?: string;
}

/** One crash of a crasher at its hook. */
interface CrashRecord {
  round: number;
  hook: Hook;
  slot: number;
  adapter: string;
  pid: number | undefined;
  /** How the process exited (`SIGKILL`), or `timeout` when the hook never fired. */
  exit: number | string | null;
  /** From the first request of the hook to the exit. */
  crashAfterMs: number;
  /** How long the crasher took to start (answer `/health`). */
  startMs: number;
  /** Harness clock (ms since epoch) of the exit, to time the completer. */
  crashedAt: number;
}

/** A key's rows once everything settled. */
interface KeyCounts {
  key: string;
  round: number;
  hook: Hook;
  client: 'retry' | 'none';
  crashes: boolean;
  atCrash: string;
  clientAnswer: string;
  record: string;
  /**
   * Who wrote its final response: `before the crash` (at after_job_taken the crasher answered
   * first), `client` (its retry took the key over and ran it) or `completer` (it had finished
   * the key by the time a client came back, or nobody came back).
   */
  finishedBy: 'before the crash' | 'client' | 'completer';
  attempts: number;
  /** From the crash of its hook to its record's last write, its completion (negative: it was
   *  completed before the crash, as at after_job_taken). */
  completedAfterCrashMs: number | null;
  providerCalls: number;
  /** Payment rows of any status. */
  payments: number;
  succeeded: number;
  charges: number;
  receipts: number;
}

const shortHook: Record<Hook, string> = {
  after_job_taken: 'ajt',
  after_payment_created: 'apc',
  after_charge_before_record: 'acbr',
  after_charged: 'ac',
};

/**
 * Phases: rounds of `kill -9` at every phase boundary of `POST /payments`, through the sample's
 * crash hooks. For each hook a crasher (`SAMPLE_CRASH_AT=<hook>`, a prefix of its own, a slow
 * provider) gets a few keys: some whose client retries on a survivor until final, some whose
 * client sends once and gives up, so only the completer can finish them. The crasher kills
 * itself at the hook; the next hook's crasher starts in its place while the survivors (completer
 * on) serve the retries. Every key must end completed with exactly one payment, one provider
 * charge and one receipt, and replay its 201.
 */
export async function runPhases(context: ScenarioContext): Promise<ScenarioResult> {
  const startedAt = Date.now();
  const { sizes, adapters } = context.options;
  const slotAdapters = [adapters[0], adapters[1], adapters[0], adapters[1], adapters[1]];
  const cluster = new AppCluster(
    appEnv(context, completerEnv(context.options.leaseSeconds)),
    slotAdapters,
  );
  const client = new ChaosClient(cluster);
  const keys: PhaseKey[] = [];
  const crashes: CrashRecord[] = [];
  const failures: string[] = [];
  const loads: Promise<unknown>[] = [];
  const hooks = Array.from({ length: sizes.phasesRounds }, (_, round) =>
    HOOKS.map((hook, index) => ({ round, hook, slot: CRASH_SLOTS[(index + round) % 2] })),
  ).flat();
  const survivorEnv = { IDEMPOTENCY_JOBS_INTERVAL_SECONDS: NO_DRAIN_SECONDS };
  const crasherEnv = (round: number, hook: Hook) => ({
    IDEMPOTENCY_JOBS_INTERVAL_SECONDS: FAST_DRAIN_SECONDS,
    PROVIDER_LATENCY_MS: String(CRASHER_PROVIDER_LATENCY_MS),
    SAMPLE_CRASH_AT: hook,
    SAMPLE_CRASH_KEY_PREFIX: crashPrefix(context.tag, round, hook),
  });

  /** Records of these keys: `status@recovery_point` by plan id. */
  const recordStates = async (of: PhaseKey[]): Promise<Map<string, string>> => {
    const rows = await context.db.query<{ scope: string; key: string; state: string }>(
      `SELECT scope, idempotency_key AS key, status || '@' || coalesce(recovery_point, '-') AS state
         FROM idempotency_records WHERE idempotency_key = ANY($1::text[])`,
      [of.map((key) => key.plan.key)],
    );
    return new Map(rows.map((row) => [planId(row.scope, row.key), row.state]));
  };
  const stateOf = (states: Map<string, string>, key: PhaseKey) =>
    states.get(planId(key.plan.account, key.plan.key));

  /** Sends once and gives up, whatever comes back. */
  const sendOnce = (key: PhaseKey, slot: number, phase: string) =>
    client.send(slot, key.plan.request, phase).then((exchange) => {
      key.clientAnswer = statusLabel(exchange);
    });
  /** One attempt on the crasher, then retries on the survivors until final. */
  const sendWithRetries = async (key: PhaseKey, slot: number, index: number, phase: string) => {
    const first: Exchange = await client.send(slot, key.plan.request, phase);
    key.clientAnswer = statusLabel(first);
    if (isFinal(first.status)) return;
    const { final } = await client.sendUntilFinal(key.plan.request, {
      firstSlot: SURVIVORS[index % SURVIVORS.length],
      slots: SURVIVORS,
      deadlineMs: 45_000,
      maxRetryDelayMs: 1000,
      phase,
    });
    key.clientAnswer = final ? statusLabel(final) : 'none';
  };

  /** Throws one hook's keys at its crasher and waits until it killed itself. */
  const crashAt = async (
    round: number,
    hook: Hook,
    slot: number,
    startMs: number,
  ): Promise<void> => {
    const phase = `phases-r${round}-${shortHook[hook]}`;
    const prefix = crashPrefix(context.tag, round, hook);
    const mine: PhaseKey[] = [];
    const add = (kind: PhaseKey['client'], index: number, withPrefix: boolean) => {
      const key = `${withPrefix ? prefix : `ph-${context.tag}-r${round}-${hook}-o-`}${kind}${index}`;
      const plan = paymentPlan(`acct_phases_${mine.length % 2}`, key, { amount: 100 + index });
      if (kind === 'none') plan.noRetry = true;
      mine.push({ plan, round, hook, client: kind, crashes: withPrefix });
    };
    for (let index = 0; index < sizes.phasesNoRetryKeys; index++) {
      // At after_payment_created only one key carries the prefix: see below.
      add('none', index, hook !== 'after_payment_created' || index === 0);
    }
    for (let index = 0; index < sizes.phasesRetryKeys; index++) {
      add('retry', index, hook !== 'after_payment_created');
    }
    keys.push(...mine);
    const exited = cluster.expectCrash(slot);
    let dead = false;
    void exited.then(() => (dead = true));
    const pid = cluster.pid(slot);
    const loadStartedAt = client.now();
    const noRetry = mine.filter((key) => key.client === 'none');
    const retry = mine.filter((key) => key.client === 'retry');
    const fire = (list: PhaseKey[]) =>
      list.forEach((key, index) =>
        loads.push(
          key.client === 'none'
            ? sendOnce(key, slot, phase)
            : sendWithRetries(key, slot, index, phase),
        ),
      );
    if (hook === 'after_payment_created') {
      // The hook fires right after step 1, before the provider: a key that reached it would kill
      // the process before the others were claimed. So the others (without the prefix) go first,
      // and once all of them are in the slow provider call (recovery point payment_created), the
      // one key with the prefix kills the process under them.
      const [trigger, ...others] = noRetry;
      const bystanders = [...others, ...retry];
      fire(bystanders);
      await waitUntil(
        async () => {
          const states = await recordStates(bystanders);
          return bystanders.every((key) => stateOf(states, key) === 'in_flight@payment_created');
        },
        5000,
        () => dead,
      );
      fire([trigger]);
    } else {
      // Every key carries the prefix; the keys that give up go first and are claimed before the
      // first of them can reach its hook (after the slow provider call, or after its 201).
      fire(noRetry);
      await waitUntil(
        async () => {
          const states = await recordStates(noRetry);
          return noRetry.every((key) => stateOf(states, key) !== undefined);
        },
        5000,
        () => dead,
      );
      fire(retry);
    }
    const exit = await Promise.race([exited, sleep(CRASH_TIMEOUT_MS).then(() => 'timeout')]);
    const crash: CrashRecord = {
      round,
      hook,
      slot,
      adapter: cluster.adapter(slot),
      pid,
      exit,
      crashAfterMs: client.now() - loadStartedAt,
      startMs,
      crashedAt: Date.now(),
    };
    crashes.push(crash);
    if (exit === 'timeout') {
      failures.push(`round ${round} ${hook}: the crasher did not kill itself within 10 s`);
      await cluster.kill(slot);
    } else if (exit !== 'SIGKILL') {
      failures.push(
        `round ${round} ${hook}: the crasher exited with ${exit}: ` +
          cluster.lastOutput(slot).split('\n').slice(-10).join('\n'),
      );
    }
    const states = await recordStates(mine);
    for (const key of mine) key.atCrash = stateOf(states, key) ?? 'none';
    const unclaimed = noRetry.filter((key) => key.atCrash === 'none');
    if (unclaimed.length > 0) {
      failures.push(
        `round ${round} ${hook}: ${unclaimed.map((key) => key.plan.key).join(', ')} never ` +
          'reached the app before the crash (the harness sent it too late)',
      );
    }
  };

  try {
    context.log(
      `phases: ${sizes.phasesRounds} round(s) × ${HOOKS.length} crash hooks, ` +
        `${sizes.phasesNoRetryKeys} keys without retry + ${sizes.phasesRetryKeys} with per hook`,
    );
    let drainer: Promise<void> | undefined;
    for (const [index, { round, hook, slot }] of hooks.entries()) {
      const starting = Date.now();
      try {
        if (index === 0) {
          await Promise.all([
            ...SURVIVORS.map((survivor) => cluster.restart(survivor, survivorEnv)),
            cluster.restart(slot, crasherEnv(round, hook)),
          ]);
        } else {
          await cluster.restart(slot, crasherEnv(round, hook));
        }
      } catch (error) {
        failures.push(`round ${round} ${hook}: slot ${slot} did not start: ${error}`);
        continue;
      }
      await crashAt(round, hook, slot, Date.now() - starting);
      context.log(`phases: r${round} ${hook} crashed slot ${slot} (${cluster.adapter(slot)})`);
      if (hook === 'after_job_taken' && round === sizes.phasesRounds - 1) {
        drainer = cluster
          .restart(DRAINER_SLOT, { IDEMPOTENCY_JOBS_INTERVAL_SECONDS: FAST_DRAIN_SECONDS })
          .catch((error: unknown) => {
            failures.push(`the drainer (slot ${DRAINER_SLOT}) did not start: ${error}`);
          });
      }
    }
    await drainer;
    await Promise.all(loads);

    // Everything settles: the completer finishes the keys nobody retries, the drainer delivers
    // every receipt (again, for a job whose drainer died holding it).
    const settleStartedAt = Date.now();
    const settled = await waitUntil(async () => {
      const [row] = await context.db.query<{ open: number; jobs: number; missing: number }>(
        `SELECT (SELECT count(*)::int FROM idempotency_records WHERE status <> 'completed') AS open,
                (SELECT count(*)::int FROM idempotency_records_jobs) AS jobs,
                (SELECT count(*)::int FROM payments p WHERE status = 'succeeded'
                    AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.payment_id = p.id)) AS missing`,
      );
      return row.open === 0 && row.jobs === 0 && row.missing === 0;
    }, SETTLE_TIMEOUT_MS);
    const settleMs = Date.now() - settleStartedAt;

    context.log('phases: load over, verifying');
    const plans = keys.map((key) => key.plan);
    const verification = await verifyKeys({
      db: context.db,
      client,
      cluster,
      plans,
      leaseSeconds: context.options.leaseSeconds,
      allowTransportErrors: true,
      allowStoreUnavailable: false,
    });
    const counted = await countRows(context, keys, crashes);
    const extra = judge(counted.perKey, counted, verification, settled);
    return buildResult({
      scenario: 'phases',
      startedAt,
      exchanges: client.exchanges,
      verification,
      cluster,
      keys: keys.length,
      disruptions: `${crashes.length} kills`,
      receipts: counted.receipts,
      details: {
        hooks: HOOKS,
        keysWithoutRetry: keys.filter((key) => key.client === 'none').length,
        keysWithRetry: keys.filter((key) => key.client === 'retry').length,
        settledAfterLoadMs: settled ? settleMs : null,
        finishedBy: Object.fromEntries(
          (['before the crash', 'client', 'completer'] as const).map((by) => [
            by,
            counted.perKey.filter((key) => key.finishedBy === by).length,
          ]),
        ),
        slowestCompletionAfterCrashMs: Math.max(
          0,
          ...counted.perKey.map((key) => key.completedAfterCrashMs ?? 0),
        ),
        totals: {
          payments: counted.payments,
          succeededPayments: counted.succeeded,
          charges: counted.charges,
          receipts: counted.receipts,
          providerCalls: verification.providerCalls,
          jobsLeft: counted.jobsLeft,
        },
        crashes: crashes.map(({ crashedAt: _, ...crash }) => crash),
        perKey: counted.perKey,
      },
      extra: { ...extra, failures: [...failures, ...extra.failures] },
    });
  } finally {
    await cluster.stopAll();
  }
}

/** `SAMPLE_CRASH_KEY_PREFIX` of one hook in one round (no other key starts with it). */
function crashPrefix(tag: string, round: number, hook: Hook): string {
  return `ph-${tag}-r${round}-${hook}-x-`;
}

/**
 * Polls until `check` holds.
 * @param stop - gives up early when it returns true
 * @returns whether `check` held before the timeout
 */
async function waitUntil(
  check: () => Promise<boolean>,
  timeoutMs: number,
  stop: () => boolean = () => false,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !stop()) {
    if (await check()) return true;
    await sleep(20);
  }
  return false;
}

/** Reads every key's rows, and the totals. */
async function countRows(context: ScenarioContext, keys: PhaseKey[], crashes: CrashRecord[]) {
  const db = context.db;
  const [records, payments, charges, calls, receipts, [jobs]] = await Promise.all([
    db.query<{
      scope: string;
      key: string;
      record_id: string;
      status: string;
      recovery_point: string | null;
      attempts: number;
      updated_ms: number;
    }>(
      `SELECT scope, idempotency_key AS key, record_id, status, recovery_point, attempts,
              (extract(epoch FROM updated_at) * 1000)::float8 AS updated_ms
         FROM idempotency_records`,
    ),
    db.query<{ id: string; account_id: string; description: string | null; status: string }>(
      'SELECT id, account_id, description, status FROM payments',
    ),
    db.query<{ id: string; idempotency_key: string }>(
      'SELECT id, idempotency_key FROM provider_charges',
    ),
    db.query<{ idempotency_key: string; calls: number }>(
      'SELECT idempotency_key, calls FROM provider_calls',
    ),
    db.query<{ payment_id: string }>('SELECT payment_id FROM receipts'),
    db.query<{ jobs: number }>('SELECT count(*)::int AS jobs FROM idempotency_records_jobs'),
  ]);
  const recordOf = new Map(records.map((row) => [planId(row.scope, row.key), row]));
  const crashOf = new Map(crashes.map((crash) => [`${crash.round}/${crash.hook}`, crash]));
  const paymentsOfKeys = new Set<string>();
  const perKey: KeyCounts[] = keys.map((key) => {
    const record = recordOf.get(planId(key.plan.account, key.plan.key));
    const chargeKey = record ? chargeKeyOf(record.record_id) : undefined;
    const own = payments.filter(
      (payment) => payment.account_id === key.plan.account && payment.description === key.plan.key,
    );
    for (const payment of own) paymentsOfKeys.add(payment.id);
    const crash = crashOf.get(`${key.round}/${key.hook}`);
    return {
      key: `${key.plan.account}/${key.plan.key}`,
      round: key.round,
      hook: key.hook,
      client: key.client,
      crashes: key.crashes,
      atCrash: key.atCrash ?? 'none',
      clientAnswer: key.clientAnswer ?? 'none',
      record: record ? `${record.status}@${record.recovery_point ?? '-'}` : 'none',
      finishedBy:
        key.atCrash === 'completed@finished'
          ? 'before the crash'
          : key.client === 'retry' && key.clientAnswer === '201'
            ? 'client'
            : 'completer',
      attempts: record?.attempts ?? 0,
      completedAfterCrashMs:
        record?.status === 'completed' && crash
          ? Math.round(record.updated_ms - crash.crashedAt)
          : null,
      providerCalls: Number(calls.find((call) => call.idempotency_key === chargeKey)?.calls ?? 0),
      payments: own.length,
      succeeded: own.filter((payment) => payment.status === 'succeeded').length,
      charges: charges.filter((charge) => charge.idempotency_key === chargeKey).length,
      receipts: receipts.filter((receipt) =>
        own.some((payment) => payment.id === receipt.payment_id),
      ).length,
    };
  });
  return {
    perKey,
    payments: payments.length,
    succeeded: payments.filter((payment) => payment.status === 'succeeded').length,
    charges: charges.length,
    receipts: receipts.length,
    orphanReceipts: receipts.filter((receipt) => !paymentsOfKeys.has(receipt.payment_id)).length,
    jobsLeft: jobs.jobs,
  };
}

/**
 * What `verifyKeys` does not count: payments that are not the key's one succeeded payment (left
 * pending, or a second one), receipts (none, or more than one), jobs never delivered. And, as a
 * last guard, any key whose payments, charges or receipts are not exactly one.
 */
function judge(
  perKey: KeyCounts[],
  totals: { orphanReceipts: number; jobsLeft: number },
  verification: { duplicates: number; lost: number; stuck: number; failures: number },
  settled: boolean,
): { duplicates: string[]; lost: string[]; stuck: string[]; failures: string[] } {
  const duplicates: string[] = [];
  const lost: string[] = [];
  const stuck: string[] = [];
  const failures: string[] = [];
  for (const key of perKey) {
    const extraPayments = key.payments - Math.max(1, key.succeeded);
    if (extraPayments > 0) {
      duplicates.push(
        `${key.key}: ${key.payments} payments, ${key.succeeded} succeeded (the rest left behind)`,
      );
    }
    if (key.receipts > 1) duplicates.push(`${key.key}: ${key.receipts} receipts`);
    if (key.succeeded > 0 && key.receipts === 0)
      lost.push(`${key.key}: its payment has no receipt`);
  }
  if (totals.orphanReceipts > 0) {
    duplicates.push(`${totals.orphanReceipts} receipt(s) belong to no key's payment`);
  }
  if (totals.jobsLeft > 0) {
    stuck.push(`${totals.jobsLeft} staged job(s) still undelivered (pending or dead) at the end`);
  }
  const notOne = perKey.filter(
    (key) => key.payments !== 1 || key.succeeded !== 1 || key.charges !== 1 || key.receipts !== 1,
  );
  const counted =
    duplicates.length + lost.length + stuck.length + verification.duplicates + verification.lost;
  if (notOne.length > 0 && counted + verification.stuck + verification.failures === 0) {
    failures.push(
      ...notOne.map(
        (key) =>
          `${key.key}: ${key.payments} payments (${key.succeeded} succeeded), ` +
          `${key.charges} charges, ${key.receipts} receipts; expected exactly 1 each`,
      ),
    );
  }
  if (!settled && notOne.length === 0 && totals.jobsLeft === 0) {
    failures.push(`the keys did not settle within ${SETTLE_TIMEOUT_MS / 1000} s of the load`);
  }
  return { duplicates, lost, stuck, failures };
}
