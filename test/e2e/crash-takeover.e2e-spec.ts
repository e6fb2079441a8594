/**
 * A process that dies holding a key (SIGKILL, mid-handler): its key answers 409 while the lease
 * it last renewed is live, and is taken over by another instance once the lease lapses.
 *
 * The dying instance's wall clock is also run an hour ahead of, and an hour behind, the
 * survivor's and the database's: leases are written and read with the database's clock only, so
 * a clock that is off neither ends a live lease early (behind) nor keeps a dead one (ahead).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import { freePort } from '../fixtures/free-port';
import type { TestDatabase } from '../fixtures/database';
import { recordInstant, sleepPast } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

// Renewed every 0.5 s by the child's heartbeat: a loaded host would have to starve the child for
// a whole second before its live lease lapsed (with 0.6 s, 0.4 s did).
const LEASE_SECONDS = 1.5;

const HOUR_MS = 3_600_000;

function startChild(
  adapter: string,
  url: string,
  port: number,
  skewMs: number,
): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', join(__dirname, '../fixtures/crash-app.ts')],
    {
      env: {
        ...process.env,
        DATABASE_URL: url,
        PORT: String(port),
        HTTP_ADAPTER: adapter,
        LOCK_TIMEOUT_SECONDS: String(LEASE_SECONDS),
        CLOCK_SKEW_MS: String(skewMs),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      const started = /listening at (\d+)/.exec(chunk.toString());
      if (!started) return;
      // The child's clock is off by what was asked (to within the time it took to say so).
      const off = Number(started[1]) - Date.now();
      if (Math.abs(off - skewMs) < 60_000) resolve(child);
      else reject(new Error(`the child's clock is off by ${off} ms, not ${skewMs}`));
    });
    child.on('exit', (code) => reject(new Error(`child exited early with ${code}`)));
  });
}

const CLOCKS = [
  ['the same clock', 0],
  ['a clock an hour ahead', HOUR_MS],
  ['a clock an hour behind', -HOUR_MS],
] as const;

describe.each(ADAPTERS)('a crashed instance on %s', (adapter) => {
  let db: TestDatabase;
  let survivor: TestApp;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    survivor = await createTestApp(adapter, db, {
      module: { execution: { lockTimeoutSeconds: LEASE_SECONDS } },
    });
  });
  afterAll(async () => {
    child?.kill('SIGKILL');
    await survivor?.close();
    await db?.drop();
  });

  it.each(CLOCKS)(
    'with %s, leaves its key in flight until the lease lapses, then another instance takes it over',
    async (_clock, skewMs) => {
      const port = await freePort();
      child?.kill('SIGKILL');
      child = await startChild(adapter, db.url, port, skewMs);
      const key = `crash-${adapter}-${skewMs}-${Date.now()}`;
      const body = { amount: 5, note: key, gate: key };
      const record = async () =>
        (await db.query('SELECT * FROM idempotency_records WHERE idempotency_key = $1', [key]))[0];

      request(`http://127.0.0.1:${port}`)
        .post('/orders')
        .set('Idempotency-Key', key)
        .send(body)
        .catch(() => undefined);
      await waitFor(async () => (await record())?.status === 'in_flight');
      // Renewed by the child's heartbeat while it lives: still in flight once the database clock
      // is past the lease it was claimed with (both instants read from PostgreSQL).
      const claimed = await recordInstant(db, key, 'locked_until');
      expect(await sleepPast(db, claimed)).toBeGreaterThan(0);
      expect(await recordInstant(db, key, 'locked_until')).toBeGreaterThan(claimed);
      expect(
        (await request(survivor.server).post('/orders').set('Idempotency-Key', key).send(body))
          .status,
      ).toBe(409);

      child.kill('SIGKILL');
      await new Promise((r) => child!.once('exit', r));
      await waitFor(
        async () =>
          (
            await db.query(
              'SELECT locked_until < now() AS lapsed FROM idempotency_records WHERE idempotency_key = $1',
              [key],
            )
          )[0].lapsed,
        5000,
      );

      const takeover = request(survivor.server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .send(body)
        .then((r) => r);
      await waitFor(async () => (await record())?.attempts === 2);
      survivor.probe.open(`${key}#2`);
      const res = await takeover;
      expect(res.status).toBe(201);
      const replay = await request(survivor.server)
        .post('/orders')
        .set('Idempotency-Key', key)
        .send(body);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(res.text);
      expect(
        await db.query('SELECT count(*)::int AS n FROM orders WHERE note = $1', [key]),
      ).toEqual([{ n: 1 }]);
    },
  );
});
