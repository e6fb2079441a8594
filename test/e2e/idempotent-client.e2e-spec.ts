/**
 * The retrying client (`nest-idempotency/client`) creating payments in the sample app through a
 * fault-injecting proxy (sample-app/client-demo/lossy-proxy.ts): some answers are lost after the
 * server acted, some requests hang past the client's attempt timeout. Over a few hundred
 * operations per adapter: every operation ends with its one answer, the provider holds exactly
 * one charge per payment, no final 4xx is ever retried, and the backoff waits are spread the way
 * full jitter spreads them.
 */
import type { IdempotentResponse, IdempotentRetry } from '../../lib/client';
import { createIdempotentClient } from '../../lib/client';
import { ACCOUNT_HEADER } from '../../sample-app/accounts/account-id';
import { LossyProxy } from '../../sample-app/client-demo/lossy-proxy';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { startSampleApp } from '../fixtures/sample-app';
import type { InProcessSampleApp } from '../fixtures/sample-app';

const PAYMENTS = 200;
const INVALID = 15; // 400: amount must be positive
const REUSED = 15; // 422: a key already used with another body
const CONCURRENCY = 8;
/** Answers the client must never retry, whatever it was told (the sample's final answers). */
const FINAL = new Set([200, 201, 400, 402, 404, 422]);

type Kind = 'payment' | 'invalid' | 'reused';
interface Operation {
  kind: Kind;
  customerId: string;
  key?: string;
  body: Record<string, unknown>;
  result?: IdempotentResponse<any>;
  error?: unknown;
}

/** Runs `tasks` with at most `limit` at a time. */
async function pool(tasks: (() => Promise<void>)[], limit: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]();
  };
  await Promise.all(Array.from({ length: limit }, worker));
}

describe.each(['express', 'fastify'] as const)(
  'the retrying client through a lossy proxy (%s)',
  (adapter) => {
    let db: TestDatabase;
    let sample: InProcessSampleApp;
    let proxy: LossyProxy;
    const operations: Operation[] = [];
    const retries: IdempotentRetry[] = [];

    beforeAll(async () => {
      db = await createTestDatabase();
      sample = await startSampleApp(adapter, db, { jobsIntervalSeconds: 3600 });
      await sample.app.listen(0, '127.0.0.1');
      const { port } = new URL((await sample.app.getUrl()).replace('[::1]', '127.0.0.1'));
      proxy = await LossyProxy.start({
        target: { host: '127.0.0.1', port: Number(port) },
        loseRate: 0.15,
        hangRate: 0.05,
      });
      const headers = { [ACCOUNT_HEADER]: 'acct_client' };
      const client = createIdempotentClient({
        baseUrl: proxy.url,
        headers,
        attemptTimeoutMs: 1_000,
        backoffMs: 40,
        maxBackoffMs: 800,
        retries: 12,
        deadlineMs: 60_000,
        onRetry: (retry) => retries.push(retry),
      });

      for (let i = 0; i < PAYMENTS; i++) {
        const customerId = `cus_client_${adapter}_${i}`;
        operations.push({
          kind: 'payment',
          customerId,
          body: { amount: 1000 + i, currency: 'eur', customerId },
        });
      }
      for (let i = 0; i < INVALID; i++) {
        const customerId = `cus_client_${adapter}_invalid_${i}`;
        operations.push({
          kind: 'invalid',
          customerId,
          body: { amount: -1, currency: 'eur', customerId },
        });
      }
      // Keys first used straight on the server (not through the proxy), then reused by the
      // client with another amount: the client's only exchanges with those keys are its own.
      for (let i = 0; i < REUSED; i++) {
        const customerId = `cus_client_${adapter}_reused_${i}`;
        const key = `reused-${adapter}-${i}`;
        const first = await fetch(`${await sample.app.getUrl()}/payments`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ amount: 500, currency: 'eur', customerId }),
        });
        expect(first.status).toBe(201);
        operations.push({
          kind: 'reused',
          customerId,
          key,
          body: { amount: 501, currency: 'eur', customerId },
        });
      }

      // Interleaved, so final 4xx answers and payments share the faults.
      const order = operations
        .map((_, i) => i)
        .sort((a, b) => ((a * 7919) % 230) - ((b * 7919) % 230));
      await pool(
        order.map((i) => async () => {
          const operation = operations[i];
          try {
            operation.result = await client.post('/payments', operation.body, {
              idempotencyKey: operation.key,
            });
          } catch (error) {
            operation.error = error;
          }
        }),
        CONCURRENCY,
      );
    }, 180_000);

    afterAll(async () => {
      await proxy?.close();
      await sample?.close();
      await db?.drop();
    });

    it('injected faults: answers lost after the server acted, and requests that hung', () => {
      const counts = proxy.counts();
      expect(counts.lose).toBeGreaterThanOrEqual(15);
      expect(counts.hang).toBeGreaterThanOrEqual(2);
      expect(retries.filter((r) => r.reason === 'network').length).toBeGreaterThanOrEqual(15);
      expect(retries.filter((r) => r.reason === 'timeout').length).toBeGreaterThanOrEqual(2);
    });

    it('ends every operation with its one answer', () => {
      expect(operations.filter((o) => o.error !== undefined).map((o) => String(o.error))).toEqual(
        [],
      );
      const statuses = (kind: Kind) =>
        operations.filter((o) => o.kind === kind).map((o) => o.result!.status);
      expect(statuses('payment')).toEqual(Array(PAYMENTS).fill(201));
      expect(statuses('invalid')).toEqual(Array(INVALID).fill(400));
      expect(statuses('reused')).toEqual(Array(REUSED).fill(422));
      const payments = operations.filter((o) => o.kind === 'payment');
      expect(new Set(payments.map((o) => o.result!.body.id)).size).toBe(PAYMENTS);
      // Some answers were replays of an execution whose first answer was lost.
      expect(payments.filter((o) => o.result!.replayed).length).toBeGreaterThan(0);
    });

    it('leaves exactly one charge and one payment per operation at the provider', async () => {
      const rows = await db.query<{ customer_id: string; charges: number; payments: number }>(
        `SELECT c.customer_id, count(DISTINCT c.id)::int AS charges,
              (SELECT count(*)::int FROM payments p WHERE p.customer_id = c.customer_id) AS payments
         FROM provider_charges c WHERE c.customer_id LIKE $1 GROUP BY c.customer_id`,
        [`cus_client_${adapter}_%`],
      );
      const byCustomer = new Map(rows.map((row) => [row.customer_id, row]));
      for (const operation of operations) {
        const row = byCustomer.get(operation.customerId);
        if (operation.kind === 'invalid') expect(row).toBeUndefined();
        else expect(row).toMatchObject({ charges: 1, payments: 1 }); // reused: the first request's
      }
      expect(rows).toHaveLength(PAYMENTS + REUSED);
    });

    it('never retries a final answer', () => {
      for (const operation of operations) {
        const exchanges = proxy.byKey.get(operation.result!.idempotencyKey)!;
        expect(exchanges.length).toBe(operation.result!.attempts);
        // A final answer that reached the client in time is always the last exchange of its
        // key. One the proxy passed after the attempt's timeout (a loaded host) was not received.
        const key = operation.result!.idempotencyKey;
        const late = new Set(
          retries
            .filter((r) => r.idempotencyKey === key && r.reason === 'timeout')
            .map((r) => r.attempt - 1),
        );
        const delivered = exchanges.findIndex(
          (e, i) => e.fate === 'pass' && FINAL.has(e.status!) && !late.has(i),
        );
        if (delivered !== exchanges.length - 1) {
          // Spelled out whole: a diff would show only the index.
          const why = retries
            .filter((r) => r.idempotencyKey === key)
            .map(({ attempt, reason, status }) => ({ attempt, reason, status }));
          throw new Error(
            `${key}: the final answer delivered in time is exchange ${delivered}, not the last; ` +
              JSON.stringify({ exchanges, why, result: operation.result!.status }),
          );
        }
      }
      expect(retries.filter((r) => r.reason === 'status' && FINAL.has(r.status!))).toEqual([]);
    });

    it('spreads backoff waits uniformly under their ceilings (full jitter)', () => {
      const backoffs = retries.filter((r) => !r.retryAfter);
      expect(backoffs.length).toBeGreaterThanOrEqual(20);
      // Waits are whole milliseconds drawn under each ceiling: +0.5 centres each on its interval.
      const u = backoffs.map((r) => (r.delayMs + 0.5) / r.backoffCeilingMs).sort((a, b) => a - b);
      // Kolmogorov–Smirnov distance to the uniform distribution, at the 0.1 % level.
      const distance = Math.max(
        ...u.map((x, i) => Math.max((i + 1) / u.length - x, x - i / u.length)),
      );
      expect(distance).toBeLessThan(1.95 / Math.sqrt(u.length));
      // Not a handful of fixed waits (integer milliseconds under a 40 ms first ceiling repeat,
      // so this only rules out a backoff without jitter).
      expect(new Set(backoffs.map((r) => r.delayMs)).size).toBeGreaterThanOrEqual(10);
      // Retries after a 409 waited the server's Retry-After (1 s), no less.
      for (const retry of retries.filter((r) => r.status === 409)) {
        expect(retry.delayMs).toBeGreaterThanOrEqual(1000);
      }
    });
  },
);
