/**
 * The history run's webhook sender: each event, Stripe-signed, delivered two or three times, at
 * once to different instances or one after another, each delivery retried until final as a
 * provider does. Every attempt goes into the history under the event's id.
 */
import { createHmac } from 'node:crypto';
import type { Ledger } from './history-instances';
import { WEBHOOK_SECRET } from './history-webhook-route';
import type { WebhookEventBody } from './history-webhook-route';
import { keyAfterKey, pick, postRecorded, untilFinal } from './history-workload';
import type { Target, WorkloadCounts } from './history-workload';

const TIMEOUT_MS = 2_500;

/** One signed delivery of `event` to `instance`, recorded; returns its status. */
function deliver(
  ledger: Ledger,
  counts: WorkloadCounts,
  instance: Target,
  event: WebhookEventBody,
  client: string,
): Promise<number | undefined> {
  counts.webhookDeliveries++;
  const raw = JSON.stringify(event);
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac('sha256', WEBHOOK_SECRET).update(`${t}.${raw}`).digest('hex');
  return postRecorded(
    ledger,
    counts,
    { key: event.id, client, request: event },
    {
      url: `${instance.url}/webhooks/events`,
      // The unsigned idempotency-key header only names the event for the lossy proxy's records.
      headers: { 'stripe-signature': `t=${t},v1=${v1}`, 'idempotency-key': event.id },
      body: raw,
      timeoutMs: TIMEOUT_MS,
    },
  );
}

/** Delivers `event` until final (bounded), on instance after instance from `first`. */
function deliverUntilFinal(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  event: WebhookEventBody,
  plan: { client: string; first: number; deadline: number },
): Promise<void> {
  return untilFinal(counts, plan.deadline, (n) =>
    deliver(ledger, counts, pick(instances, plan.first + n), event, plan.client),
  );
}

const eventOf = (id: string, index: number): WebhookEventBody => ({
  id,
  type: 'payment.succeeded',
  amount: 100 + index,
});

/**
 * `workers` senders deliver event after event until `untilMs`, each two or three times (at once
 * to different instances half the time). Returns the event ids sent.
 */
export function sendWebhooks(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  options: { prefix: string; workers: number; untilMs: number; retryWindowMs: number },
): Promise<string[]> {
  return keyAfterKey({ ...options, prefix: `evt-${options.prefix}` }, async (id, index) => {
    counts.keys++;
    counts.webhookEvents++;
    const event = eventOf(id, index);
    const deadline = Date.now() + options.retryWindowMs;
    const copies = Math.random() < 0.5 ? 2 : 3;
    const plan = (copy: number) => ({ client: `webhook-${copy}`, first: index + copy, deadline });
    const send = (copy: number) => deliverUntilFinal(ledger, counts, instances, event, plan(copy));
    if (Math.random() < 0.5) {
      await Promise.all(Array.from({ length: copies }, (_, copy) => send(copy)));
    } else {
      for (let copy = 0; copy < copies; copy++) await send(copy);
    }
    counts.retries += copies - 1;
  });
}

/** After the settle period: every event once more, until final (bounded). */
export async function probeWebhooks(
  ledger: Ledger,
  counts: WorkloadCounts,
  instances: Target[],
  ids: string[],
  retryWindowMs: number,
): Promise<void> {
  const deadline = Date.now() + retryWindowMs;
  await Promise.all(
    ids.map((id, index) =>
      deliverUntilFinal(ledger, counts, instances, eventOf(id, index), {
        client: 'probe',
        first: index,
        deadline,
      }),
    ),
  );
}
