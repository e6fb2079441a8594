/**
 * kill -9 at each boundary of `POST /payments` in phases (the sample's crash hooks), on both
 * adapters, with real processes on one database. After each crash, either (a) the client
 * retries, or (b) nobody does and the completer finishes the payment; either way the key ends
 * with exactly one payment, one provider charge and one receipt, and a client retry replays
 * the final 201.
 */
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { spawnSampleApp } from '../fixtures/sample-app-process';
import type { SampleAppProcess } from '../fixtures/sample-app-process';
import { waitFor } from '../fixtures/wait-for';

jest.setTimeout(120_000);

/** The hooks, `after_job_taken` first: its crasher must be the only drainer when it stages. */
const HOOKS = [
  'after_job_taken',
  'after_payment_created',
  'after_charge_before_record',
  'after_charged',
] as const;

const LEASE_SECONDS = '1';

describe.each(['express', 'fastify'] as const)('kill -9 at each phase boundary (%s)', (adapter) => {
  describe.each(['a client retry', 'the completer'] as const)('finished by %s', (finisher) => {
    let db: TestDatabase;
    let survivor: SampleAppProcess | undefined;
    const started: SampleAppProcess[] = [];
    const byCompleter = finisher === 'the completer';

    /** One instance; the completer only runs (soon) where this finisher needs it. */
    async function start(extra: Record<string, string> = {}): Promise<SampleAppProcess> {
      const app = await spawnSampleApp({
        DATABASE_URL: db.url,
        HTTP_ADAPTER: adapter,
        IDEMPOTENCY_LOCK_TIMEOUT_SECONDS: LEASE_SECONDS,
        IDEMPOTENCY_JOBS_INTERVAL_SECONDS: '0.1',
        IDEMPOTENCY_COMPLETER_INTERVAL_SECONDS: '0.2',
        IDEMPOTENCY_COMPLETER_AFTER_SECONDS: byCompleter ? '0.5' : '3600',
        ...extra,
      });
      started.push(app);
      return app;
    }

    beforeAll(async () => {
      db = await createTestDatabase();
    });

    afterAll(async () => {
      await Promise.all(started.map((app) => app.stop('SIGKILL')));
      await db?.drop();
    });

    const post = (app: SampleAppProcess, key: string, body: object) =>
      fetch(`${app.url}/payments`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-account-id': 'acct_crash',
          'idempotency-key': key,
        },
        body: JSON.stringify(body),
      });

    const tally = async (customerId: string) =>
      (
        await db.query(
          `SELECT (SELECT count(*)::int FROM payments WHERE customer_id = $1) AS payments,
                  (SELECT count(*)::int FROM payments
                    WHERE customer_id = $1 AND status = 'succeeded') AS succeeded,
                  (SELECT count(*)::int FROM provider_charges WHERE customer_id = $1) AS charges,
                  (SELECT count(*)::int FROM receipts r JOIN payments p ON p.id = r.payment_id
                    WHERE p.customer_id = $1) AS receipts`,
          [customerId],
        )
      )[0];

    it.each(HOOKS)('at %s', async (hook) => {
      const key = `crash-${hook}`;
      const customerId = `cus_${hook}`;
      const body = { amount: 4321, currency: 'eur', customerId };
      const crasher = await start({ SAMPLE_CRASH_AT: hook, SAMPLE_CRASH_KEY_PREFIX: 'crash-' });
      const first = await post(crasher, key, body).catch(() => undefined);
      expect(await crasher.exited).toBe('SIGKILL');
      if (hook === 'after_job_taken') {
        // The payment was answered; the process died holding its receipt job.
        expect(first?.status).toBe(201);
      } else {
        expect(first).toBeUndefined(); // the connection died with the process
      }
      survivor ??= await start();

      let final: Response | undefined;
      if (byCompleter) {
        await waitFor(async () => {
          const [record] = await db.query(
            'SELECT status FROM idempotency_records WHERE idempotency_key = $1',
            [key],
          );
          return record?.status === 'completed';
        }, 20_000);
      } else {
        // The client retries the same key until it gets a final answer (409 while the dead
        // process's lease is live).
        await waitFor(async () => {
          final = await post(survivor!, key, body);
          return final.status !== 409;
        }, 20_000);
        expect(final!.status).toBe(201);
      }
      await waitFor(async () => (await tally(customerId)).receipts > 0, 20_000);
      const replay = await post(survivor, key, body);
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      const replayed = (await replay.json()) as { status: string; chargeId: string };
      if (final && hook !== 'after_job_taken') expect(replayed).toEqual(await final.json());
      if (first && hook === 'after_job_taken') expect(replayed).toEqual(await first.json());
      expect(replayed).toMatchObject({ status: 'succeeded', customerId });
      expect(await tally(customerId)).toEqual({
        payments: 1,
        succeeded: 1,
        charges: 1,
        receipts: 1,
      });
      const [charge] = await db.query('SELECT id FROM provider_charges WHERE customer_id = $1', [
        customerId,
      ]);
      expect(replayed.chargeId).toBe(charge.id);
    });
  });
});
