/**
 * A process that dies holding a key (SIGKILL, mid-handler): its key answers 409 while the lease
 * it last renewed is live, and is taken over by another instance once the lease lapses.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import request from 'supertest';
import { createTestDatabase } from '../fixtures/database';
import { freePort } from '../fixtures/free-port';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const LEASE_SECONDS = 0.6;

function startChild(adapter: string, url: string, port: number): Promise<ChildProcess> {
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
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('listening')) resolve(child);
    });
    child.on('exit', (code) => reject(new Error(`child exited early with ${code}`)));
  });
}

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

  it('leaves its key in flight until the lease lapses, then another instance takes it over', async () => {
    const port = await freePort();
    child = await startChild(adapter, db.url, port);
    const key = `crash-${adapter}-${Date.now()}`;
    const body = { amount: 5, note: key, gate: 'never' };
    const record = async () =>
      (await db.query('SELECT * FROM idempotency_records WHERE idempotency_key = $1', [key]))[0];

    request(`http://127.0.0.1:${port}`)
      .post('/orders')
      .set('Idempotency-Key', key)
      .send(body)
      .catch(() => undefined);
    await waitFor(async () => (await record())?.status === 'in_flight');
    // Renewed by the child's heartbeat while it lives: still in flight after one lease length.
    await new Promise((r) => setTimeout(r, LEASE_SECONDS * 1500));
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
    survivor.probe.open('never#2');
    const res = await takeover;
    expect(res.status).toBe(201);
    const replay = await request(survivor.server)
      .post('/orders')
      .set('Idempotency-Key', key)
      .send(body);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(res.text);
    expect(await db.query('SELECT count(*)::int AS n FROM orders WHERE note = $1', [key])).toEqual([
      { n: 1 },
    ]);
  });
});
