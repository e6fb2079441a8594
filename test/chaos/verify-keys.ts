import type { AppCluster } from './app-cluster';
import type { ChaosClient, Exchange } from './chaos-client';
import { isFinal } from './chaos-client';
import type { ChaosDatabase } from './chaos-database';
import type { InvariantCounts } from './chaos-result';
import { chargeKeyOf, readSnapshot, waitForLeasesToLapse } from './database-snapshot';
import type { DatabaseSnapshot, RecordRow } from './database-snapshot';
import { FINAL_STATUS, planId } from './key-plan';
import type { KeyPlan } from './key-plan';
import { mapLimit } from './map-limit';

/** What `verifyKeys` needs. */
export interface VerifyContext {
  db: ChaosDatabase;
  client: ChaosClient;
  cluster: AppCluster;
  plans: KeyPlan[];
  leaseSeconds: number;
  /** Transport errors are expected (processes were killed). */
  allowTransportErrors: boolean;
  /**
   * The database was made unreachable: 503 `idempotency_store_unavailable` (the claim failed)
   * and the sample app's 503 `database_unavailable` (the handler's own query failed) are expected.
   */
  allowStoreUnavailable: boolean;
}

/** The invariant counts of a scenario's keys, and the database totals. */
export interface Verification extends InvariantCounts {
  executions: number;
  providerCalls: number;
  payments: number;
  charges: number;
  violations: string[];
}

const MAX_VIOLATIONS = 40;

function json(body: Buffer): any {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
}

function isProblem(exchange: Exchange, code: string): boolean {
  return (
    exchange.contentType.startsWith('application/problem+json') &&
    json(exchange.body)?.code === code
  );
}

/** A 503 that says the database is down, with the code the library or the sample app gives it. */
function isDatabaseDown(exchange: Exchange): boolean {
  return (
    exchange.status === 503 &&
    (isProblem(exchange, 'idempotency_store_unavailable') ||
      json(exchange.body)?.error?.code === 'database_unavailable')
  );
}

function describe(exchange: Exchange): string {
  const body = exchange.body.toString('utf8').slice(0, 160);
  return `${exchange.status ?? exchange.error} ${exchange.contentType} ${body}`.trim();
}

/**
 * Checks a scenario's keys once its load is over, from the responses its clients got and from
 * the database:
 *
 * 1. after the lease, no record holds a live lease (stuck);
 * 2. every response was one the contract allows: 409/503 as problem+json, no other 5xx than the
 *    plan's handler failures, a final status that matches the plan;
 * 3. the clients of one key were never told of two different executions (duplicates) and every
 *    final answer of a key is byte-identical (lost otherwise);
 * 4. a final retry of every key on every process is a replay of exactly those bytes (lost), and
 *    gets a final answer at all (stuck); for a key whose client gave up (`noRetry`), the first
 *    final retry must already be a replay (stuck otherwise: nobody finished it);
 * 5. the record is completed with those bytes; the key has exactly the payment, charge or refund
 *    its answer names (lost when missing, duplicates when more), and no payment, charge or refund
 *    exists that no key accounts for (duplicates: a handler ran unprotected or twice).
 */
export async function verifyKeys(context: VerifyContext): Promise<Verification> {
  const { db, client, cluster, plans } = context;
  const violations: string[] = [];
  const counts: InvariantCounts = { duplicates: 0, lost: 0, stuck: 0, leaks: 0, failures: 0 };
  const lostKeys = new Set<string>();
  const stuckKeys = new Set<string>();
  const note = (line: string) => {
    if (violations.length < MAX_VIOLATIONS) violations.push(line);
    else if (violations.length === MAX_VIOLATIONS) violations.push('… (more violations)');
  };
  const lose = (id: string, why: string) => {
    if (!lostKeys.has(id)) counts.lost++;
    lostKeys.add(id);
    note(`lost ${id.replace('\u0000', '/')}: ${why}`);
  };
  const stick = (id: string, why: string) => {
    if (!stuckKeys.has(id)) counts.stuck++;
    stuckKeys.add(id);
    note(`stuck ${id.replace('\u0000', '/')}: ${why}`);
  };

  // 1. Leases: nothing runs any more, so every lease must lapse within one lease length.
  const live = await waitForLeasesToLapse(db, (context.leaseSeconds + 3) * 1000);
  if (live > 0) {
    counts.stuck += live;
    note(`${live} record(s) still hold a live lease ${context.leaseSeconds + 3} s after the load`);
  }

  // 2–3. What the clients were told.
  const byKey = new Map<string, Exchange[]>();
  for (const exchange of client.exchanges) {
    if (exchange.account === undefined || exchange.key === undefined) continue;
    const id = planId(exchange.account, exchange.key);
    const list = byKey.get(id) ?? [];
    list.push(exchange);
    byKey.set(id, list);
  }
  const reference = new Map<string, Exchange>();
  for (const plan of plans) {
    const id = planId(plan.account, plan.key);
    const name = `${plan.account}/${plan.key}`;
    const exchanges = byKey.get(id) ?? [];
    for (const exchange of exchanges) {
      const status = exchange.status;
      if (status === undefined) {
        if (!context.allowTransportErrors && !exchange.hungUp) {
          counts.failures++;
          note(`transport error on ${name}: ${exchange.error}`);
        }
      } else if (status === 409 && !isProblem(exchange, 'idempotency_key_in_use')) {
        counts.failures++;
        note(
          `409 that is not idempotency_key_in_use problem+json on ${name}: ${describe(exchange)}`,
        );
      } else if (
        (status === 409 || isDatabaseDown(exchange)) &&
        exchange.retryAfterSeconds === undefined
      ) {
        counts.failures++;
        note(`${status} without Retry-After on ${name}: ${describe(exchange)}`);
      }
      if (status !== undefined && status >= 500) {
        const storeDown = isDatabaseDown(exchange);
        const handler = plan.handler5xx?.some(
          (allowed) =>
            allowed.status === status &&
            (json(exchange.body)?.error?.code ?? json(exchange.body)?.code) === allowed.code,
        );
        if (!(handler || (storeDown && context.allowStoreUnavailable))) {
          counts.failures++;
          note(
            `unexpected ${status} on ${name} (slot ${exchange.slot}, ${exchange.phase}, ` +
              `t=${exchange.startedAt}–${exchange.endedAt} ms): ${describe(exchange)}`,
          );
        }
      }
    }
    const finals = exchanges.filter((exchange) => isFinal(exchange.status));
    for (const final of finals) {
      if (final.status !== FINAL_STATUS[plan.expect]) {
        counts.failures++;
        note(`${name} answered ${describe(final)}; expected ${FINAL_STATUS[plan.expect]}`);
      }
    }
    const freshBodies = new Set(
      finals.filter((final) => !final.replayed).map((final) => final.body.toString('base64')),
    );
    if (freshBodies.size > 1) {
      counts.duplicates += freshBodies.size - 1;
      note(`${name}: clients were told of ${freshBodies.size} different first executions`);
    }
    if (finals.length === 0) {
      if (!plan.noRetry) stick(id, `no final answer in ${exchanges.length} attempt(s)`);
      continue;
    }
    reference.set(id, finals[0]);
    const differing = finals.filter((final) => !final.body.equals(finals[0].body));
    if (differing.length > 0) {
      lose(
        id,
        `${differing.length} final answer(s) differ from the first: ${describe(differing[0])}`,
      );
    }
  }

  // 4. A final retry of every key on every process replays exactly what its clients got.
  await mapLimit(plans, 16, async (plan) => {
    const id = planId(plan.account, plan.key);
    for (let slot = 0; slot < cluster.size; slot++) {
      const { final, attempts } = await client.sendUntilFinal(plan.request, {
        firstSlot: slot,
        deadlineMs: (context.leaseSeconds + 5) * 1000,
        maxRetryDelayMs: 1000,
        phase: 'verify',
      });
      if (!final) {
        const last = attempts.at(-1);
        stick(
          id,
          `final retry on slot ${slot} got no final answer: ${last ? describe(last) : 'no attempt'}`,
        );
        continue;
      }
      const first = reference.get(id);
      if (!first) {
        if (plan.noRetry && !final.replayed) {
          stick(
            id,
            `its client gave up and nobody finished it: the final retry on slot ${slot} ran it ` +
              `(${describe(final)})`,
          );
        }
        reference.set(id, final);
        continue;
      }
      if (!final.replayed || final.status !== first.status || !final.body.equals(first.body)) {
        lose(
          id,
          `final retry on slot ${slot} answered ${final.replayed ? 'replay ' : ''}${describe(final)}`,
        );
      }
    }
  });

  // 5. The database.
  const snapshot = await readSnapshot(db);
  const result = checkDatabase(snapshot, plans, reference, counts, lose, note);
  return { ...counts, ...result, violations };
}

function checkDatabase(
  snapshot: DatabaseSnapshot,
  plans: KeyPlan[],
  reference: Map<string, Exchange>,
  counts: InvariantCounts,
  lose: (id: string, why: string) => void,
  note: (line: string) => void,
): Omit<Verification, keyof InvariantCounts | 'violations'> {
  const records = new Map<string, RecordRow>(
    snapshot.records.map((row) => [planId(row.scope, row.idempotency_key), row]),
  );
  const chargeKeys = new Set<string>();
  const paymentsOfKeys = new Set<string>();
  const refundsExpected = new Map<string, number>();
  let executions = 0;
  let providerCalls = 0;

  for (const plan of plans) {
    const id = planId(plan.account, plan.key);
    const first = reference.get(id);
    const record = records.get(id);
    if (!record) {
      if (first) lose(id, `no idempotency record, yet its client got ${first.status}`);
      continue;
    }
    executions += record.attempts;
    const chargeKey = chargeKeyOf(record.record_id);
    chargeKeys.add(chargeKey);
    providerCalls += snapshot.calls.get(chargeKey) ?? 0;
    if (!first) continue;
    if (
      record.status !== 'completed' ||
      record.response_status !== first.status ||
      !record.response_body?.equals(first.body)
    ) {
      lose(id, `record is ${record.status} ${record.response_status}, client got ${first.status}`);
    }
    const body = JSON.parse(first.body.toString('utf8') || 'null');
    const charges = snapshot.charges.filter((charge) => charge.idempotency_key === chargeKey);
    const payments =
      plan.request.path === '/payments'
        ? snapshot.payments.filter(
            (payment) => payment.account_id === plan.account && payment.description === plan.key,
          )
        : [];
    for (const payment of payments) paymentsOfKeys.add(payment.id);
    if (payments.length > 1 || charges.length > 1) {
      counts.duplicates += Math.max(0, payments.length - 1) + Math.max(0, charges.length - 1);
      note(`${plan.account}/${plan.key}: ${payments.length} payments, ${charges.length} charges`);
    }
    if (plan.expect === 'payment' && first.status === 201) {
      if (payments.length === 0 || charges.length === 0) {
        lose(
          id,
          `answered 201 ${body?.id} but has ${payments.length} payments, ${charges.length} charges`,
        );
      } else if (
        payments[0].id !== body?.id ||
        payments[0].charge_id !== body?.chargeId ||
        charges[0].id !== body?.chargeId
      ) {
        lose(
          id,
          `answered ${body?.id}/${body?.chargeId}, database has ${payments[0].id}/${charges[0].id}`,
        );
      }
    }
    if (plan.expect === 'declined' && (payments.length > 0 || charges.length > 0)) {
      counts.duplicates += payments.length + charges.length;
      note(
        `${plan.account}/${plan.key} was declined but has ${payments.length} payments, ${charges.length} charges`,
      );
    }
    if (plan.paymentId && first.status === 201) {
      refundsExpected.set(plan.paymentId, (refundsExpected.get(plan.paymentId) ?? 0) + 1);
      if (
        !snapshot.refunds.some(
          (refund) => refund.id === body?.id && refund.payment_id === plan.paymentId,
        )
      ) {
        lose(id, `answered refund ${body?.id}, which the database does not hold`);
      }
    }
  }

  // Rows no key accounts for: a handler ran without its record, or ran twice.
  const orphanPayments = snapshot.payments.filter((payment) => !paymentsOfKeys.has(payment.id));
  const orphanCharges = snapshot.charges.filter(
    (charge) => !chargeKeys.has(charge.idempotency_key),
  );
  if (orphanPayments.length + orphanCharges.length > 0) {
    counts.duplicates += orphanPayments.length + orphanCharges.length;
    note(
      `${orphanPayments.length} payment(s) and ${orphanCharges.length} charge(s) belong to no key: ` +
        [...orphanPayments.map((p) => p.id), ...orphanCharges.map((c) => c.id)]
          .slice(0, 5)
          .join(', '),
    );
  }
  const refundsPerPayment = new Map<string, number>();
  for (const refund of snapshot.refunds) {
    refundsPerPayment.set(refund.payment_id, (refundsPerPayment.get(refund.payment_id) ?? 0) + 1);
  }
  for (const [paymentId, count] of refundsPerPayment) {
    const expected = refundsExpected.get(paymentId) ?? 0;
    if (count > expected) {
      counts.duplicates += count - expected;
      note(`payment ${paymentId} has ${count} refunds, its keys answered ${expected}`);
    }
  }
  return {
    executions,
    providerCalls,
    payments: snapshot.payments.length,
    charges: snapshot.charges.length,
  };
}
