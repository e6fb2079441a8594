import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { spawnSampleApp } from '../fixtures/sample-app-process';
import type { SampleAppProcess } from '../fixtures/sample-app-process';

jest.setTimeout(90_000);

const started: SampleAppProcess[] = [];

async function start(env: Record<string, string>): Promise<SampleAppProcess> {
  const app = await spawnSampleApp(env);
  started.push(app);
  return app;
}

function post(app: SampleAppProcess, path: string, key: string, body: object, account = 'acct_1') {
  return fetch(`${app.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-account-id': account,
      'idempotency-key': key,
    },
    body: JSON.stringify(body),
  });
}

afterAll(async () => {
  await Promise.all(started.map((app) => app.stop('SIGKILL')));
});

describe('sample app as a process', () => {
  it('runs on the embedded PostgreSQL when DATABASE_URL is unset', async () => {
    const app = await start({});
    expect(app.output()).toContain('embedded PostgreSQL (PGlite)');
    const body = { amount: 1999, currency: 'eur', customerId: 'cus_embedded' };
    const first = await post(app, '/payments', 'embedded-1', body);
    expect(first.status).toBe(201);
    const firstText = await first.text();
    const replay = await post(app, '/payments', 'embedded-1', body);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await replay.text()).toBe(firstText);
    const charges = await (
      await fetch(`${app.url}/provider/charges?customerId=cus_embedded`)
    ).json();
    expect(charges).toHaveLength(1);

    // Concurrent requests: PGlite's socket server runs every connection in one session, so a
    // pool of several connections broke each other's prepared statements and portals (503s).
    const concurrent = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        post(app, '/payments', `embedded-many-${i}`, {
          amount: 100 + i,
          currency: 'eur',
          customerId: `cus_embedded_many_${i}`,
        }),
      ),
    );
    expect(concurrent.map((response) => response.status)).toEqual(Array(12).fill(201));
    const sameKey = await Promise.all(
      Array.from({ length: 6 }, () => post(app, '/payments', 'embedded-1', body)),
    );
    expect(sameKey.map((response) => response.status)).toEqual(Array(6).fill(201));
    // A graceful stop closes the app and the embedded databases, and exits 0.
    expect(await app.stop('SIGTERM')).toBe(0);
  });

  describe('several instances on one database', () => {
    let db: TestDatabase;
    let a: SampleAppProcess;
    let b: SampleAppProcess;

    beforeAll(async () => {
      db = await createTestDatabase();
      const env = { DATABASE_URL: db.url, PROVIDER_LATENCY_MS: '300' };
      a = await start(env); // runs the migrations
      b = await start(env);
    });

    afterAll(async () => {
      await Promise.all([a?.stop('SIGKILL'), b?.stop('SIGKILL')]);
      await db?.drop();
    });

    it('lets one instance run a key while the other answers 409, then replays it', async () => {
      const body = { amount: 5000, currency: 'eur', customerId: 'cus_race' };
      const responses = await Promise.all([
        post(a, '/payments', 'race-1', body),
        post(b, '/payments', 'race-1', body),
      ]);
      const results = await Promise.all(
        responses.map(async (r) => ({
          status: r.status,
          replayed: r.headers.get('idempotent-replayed'),
          text: await r.text(),
        })),
      );
      const winners = results.filter((r) => r.status === 201 && r.replayed === null);
      expect(winners).toHaveLength(1);
      const loser = results.find((r) => r !== winners[0])!;
      if (loser.status === 409) {
        expect(JSON.parse(loser.text)).toMatchObject({ code: 'idempotency_key_in_use' });
      } else {
        // It arrived after the winner committed: a replay is also exactly-once.
        expect(loser).toMatchObject({ status: 201, replayed: 'true', text: winners[0].text });
      }

      const [rows] = await db.query<{ payments: number; charges: number }>(
        `SELECT (SELECT count(*)::int FROM payments WHERE customer_id = 'cus_race') AS payments,
                (SELECT count(*)::int FROM provider_charges WHERE customer_id = 'cus_race') AS charges`,
      );
      expect(rows).toEqual({ payments: 1, charges: 1 });

      const winner = results[0] === winners[0] ? a : b;
      const other = winner === a ? b : a;
      const replay = await post(other, '/payments', 'race-1', body);
      expect(replay.status).toBe(201);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(await replay.text()).toBe(winners[0].text);
    });

    it('takes over the key of a killed instance once its lease lapses, charging once', async () => {
      const doomed = await start({
        DATABASE_URL: db.url,
        PROVIDER_LATENCY_MS: '60000',
        IDEMPOTENCY_LOCK_TIMEOUT_SECONDS: '1',
      });
      const body = { amount: 750, currency: 'eur', customerId: 'cus_takeover' };
      const hung = post(doomed, '/payments', 'takeover-1', body).catch(() => undefined);
      await waitFor(async () => {
        const rows = await db.query(
          `SELECT 1 FROM idempotency_records WHERE idempotency_key = 'takeover-1' AND status = 'in_flight'`,
        );
        return rows.length === 1;
      });
      const busy = await post(a, '/payments', 'takeover-1', body);
      expect(busy.status).toBe(409);
      expect(busy.headers.get('retry-after')).toBeTruthy();

      await doomed.stop('SIGKILL');
      await hung;
      let taken: Response | undefined;
      await waitFor(async () => {
        taken = await post(a, '/payments', 'takeover-1', body);
        return taken.status !== 409;
      });
      expect(taken!.status).toBe(201);
      expect(taken!.headers.get('idempotent-replayed')).toBeNull();
      const [rows] = await db.query<{ payments: number; charges: number }>(
        `SELECT (SELECT count(*)::int FROM payments WHERE customer_id = 'cus_takeover') AS payments,
                (SELECT count(*)::int FROM provider_charges WHERE customer_id = 'cus_takeover') AS charges`,
      );
      expect(rows).toEqual({ payments: 1, charges: 1 });
      const replay = await post(b, '/payments', 'takeover-1', body);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    });
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
