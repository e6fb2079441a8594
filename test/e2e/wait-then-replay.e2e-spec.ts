/**
 * Wait, then replay (docs/waiting.md): a duplicate that
 * finds its key in flight on a route with `wait` waits for the first request (`Prefer: wait=N`,
 * capped by `maxSeconds`) and gets its answer instead of 409; after a release it runs the
 * handler itself, once; past the wait it gets 409 + Retry-After; past `maxWaiters` 409 at once;
 * a waiter whose client hangs up is freed; a route without `wait` answers 409 at once as
 * before. Then two app instances on one database: a waiter on B is woken by a completion on A
 * through LISTEN/NOTIFY (its routes poll every 30 s, so an answer within a second is not a poll),
 * and with `wakeUps: 'poll'` it is woken by a poll, or takes a last look at its deadline when no
 * poll comes within its wait. Real concurrent requests, both adapters.
 */
import { request as httpRequest } from 'node:http';
import request from 'supertest';
import { Client } from 'pg';
import { typeOrmStore } from '../../lib/storage/typeorm';
import { wakeUpChannelOf } from '../../lib/storage/typeorm/typeorm-wake-ups';
import { wakeTokenOf } from '../../lib/waiting/wake-token';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';
import { WaitingController, typeOrmWakeUpsOf, waitersOf } from '../fixtures/waiting.controller';
import type { WaitBody } from '../fixtures/waiting.controller';

/** Milliseconds from the first request's completion to each waiter's answer, by path. */
const latencies: Record<string, number[]> = {};
const note = (what: string, ms: number) => (latencies[what] ??= []).push(Math.round(ms));

afterAll(() => {
  if (process.env.WAIT_LATENCY_LOG) console.log(JSON.stringify(latencies));
});

describe.each(ADAPTERS)('wait, then replay (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `wait-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, {
      controllers: [WaitingController],
      module: { request: { scope: () => 'waiting' }, wait: { maxWaiters: 3 } },
    });
    await t.app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const post = (path: string, key: string, body: WaitBody, prefer?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return (prefer ? req.set('Prefer', prefer) : req).send(body);
  };
  /** Starts the first request of `key`, held on its gate, and waits until its handler runs. */
  const startFirst = async (path: string, counter: string, key: string, body: WaitBody) => {
    const before = t.probe.ran(counter);
    const first = post(path, key, body).then((response) => response);
    await waitFor(async () => t.probe.ran(counter) === before + 1);
    // Wrapped: an async function returning the pending request would wait for it.
    return { first };
  };
  /** Starts `count` duplicates and waits until they all wait. */
  const startWaiters = async (
    path: string,
    key: string,
    body: WaitBody,
    prefer: string | undefined,
    count = 1,
  ) => {
    const before = waitersOf(t.app);
    const waiters = Array.from({ length: count }, () =>
      post(path, key, body, prefer).then((response) => ({ response, at: performance.now() })),
    );
    await waitFor(async () => waitersOf(t.app) === before + count);
    return waiters;
  };

  it.each([
    ['/waiting', 'waits'],
    ['/waiting/tx', 'tx'],
  ])(
    'on %s, duplicates with Prefer: wait get the first answer as a replay once it completes',
    async (path, counter) => {
      const key = newKey();
      const body = { gate: key };
      const { first } = await startFirst(path, counter, key, body);
      const waiters = await startWaiters(path, key, body, 'wait=5', 3);
      const opened = performance.now();
      t.probe.open(`${key}#1`);
      const original = await first;
      expect(original.status).toBe(201);
      for (const { response, at } of await Promise.all(waiters)) {
        note(`local ${path}`, at - opened);
        expect(response.status).toBe(201);
        expect(response.headers['idempotent-replayed']).toBe('true');
        expect(response.headers['preference-applied']).toBe('wait=5');
        expect(response.text).toBe(original.text);
      }
      expect(t.probe.ran(counter)).toBe(1);
      expect(waitersOf(t.app)).toBe(0);
    },
  );

  it('a final 4xx is what the waiter gets too', async () => {
    const key = newKey();
    const body = { gate: key, decline: true };
    const { first } = await startFirst('/waiting', 'waits', key, body);
    const [waiter] = await startWaiters('/waiting', key, body, 'wait=5');
    t.probe.open(`${key}#1`);
    expect((await first).status).toBe(402);
    const { response } = await waiter;
    expect(response.status).toBe(402);
    expect(response.headers['idempotent-replayed']).toBe('true');
  });

  it('without Prefer, a route with defaultSeconds waits; no Preference-Applied is sent', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting/by-default', 'by-default', key, { gate: key });
    const [waiter] = await startWaiters('/waiting/by-default', key, { gate: key }, undefined);
    t.probe.open(`${key}#1`);
    await first;
    const { response } = await waiter;
    expect(response.status).toBe(201);
    expect(response.headers['idempotent-replayed']).toBe('true');
    expect(response.headers['preference-applied']).toBeUndefined();
  });

  it('after a release, a waiter runs the handler and the others replay its answer', async () => {
    const key = newKey();
    const before = t.probe.ran('waits');
    const { first } = await startFirst('/waiting', 'waits', key, { gate: key });
    const waiters = await startWaiters('/waiting', key, { gate: key }, 'wait=5', 2);
    t.probe.open(`${key}#2`);
    t.probe.fail(`${key}#1`);
    expect((await first).status).toBe(500);
    const answers = (await Promise.all(waiters)).map(({ response }) => response);
    // Exactly one waiter ran the handler (attempt 2); the other got that answer replayed.
    expect(answers.map((r) => r.status)).toEqual([201, 201]);
    expect(answers.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(1);
    expect(answers.map((r) => r.body.attempt)).toEqual([2, 2]);
    expect(t.probe.ran('waits') - before).toBe(2);
  });

  it('past the wait: 409 with Retry-After (and Preference-Applied)', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting', 'waits', key, { gate: key });
    const sent = performance.now();
    const response = await post('/waiting', key, { gate: key }, 'wait=1');
    const waited = performance.now() - sent;
    expect(response.status).toBe(409);
    expect(response.body.code).toBe('idempotency_key_in_use');
    expect(response.headers['retry-after']).toBe('1');
    expect(response.headers['preference-applied']).toBe('wait=1');
    expect(waited).toBeGreaterThanOrEqual(950);
    // The 1 s asked for, not the route's 10 s (a loaded host may add a few seconds to the answer).
    expect(waited).toBeLessThan(5_000);
    expect(waitersOf(t.app)).toBe(0);
    t.probe.open(`${key}#1`);
    expect((await first).status).toBe(201);
  });

  it('Prefer: wait is capped by maxSeconds (Preference-Applied says what was applied)', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting', 'waits', key, { gate: key });
    const [waiter] = await startWaiters('/waiting', key, { gate: key }, 'wait=3600');
    t.probe.open(`${key}#1`);
    await first;
    expect((await waiter).response.headers['preference-applied']).toBe('wait=10');
  });

  it('a route without wait answers 409 at once, Prefer or not (the default)', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting/no-wait', 'no-wait', key, { gate: key });
    const sent = performance.now();
    const response = await post('/waiting/no-wait', key, { gate: key }, 'wait=10');
    expect(response.status).toBe(409);
    expect(response.headers['preference-applied']).toBeUndefined();
    // Well short of the 10 s asked for (a loaded host may take a few seconds to answer at once).
    expect(performance.now() - sent).toBeLessThan(5_000);
    t.probe.open(`${key}#1`);
    await first;
  });

  it('Prefer: wait=0 asks not to wait: 409 at once', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting/by-default', 'by-default', key, { gate: key });
    const sent = performance.now();
    const response = await post('/waiting/by-default', key, { gate: key }, 'wait=0');
    expect(response.status).toBe(409);
    // Well short of the route's default wait of 10 s.
    expect(performance.now() - sent).toBeLessThan(5_000);
    t.probe.open(`${key}#1`);
    await first;
  });

  it('past maxWaiters (3 here), a duplicate gets 409 at once; the waiting ones get the replay', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting', 'waits', key, { gate: key });
    const waiters = await startWaiters('/waiting', key, { gate: key }, 'wait=5', 3);
    const sent = performance.now();
    const refused = await post('/waiting', key, { gate: key }, 'wait=5');
    expect(refused.status).toBe(409);
    expect(refused.headers['retry-after']).toBe('1');
    // Well short of the 5 s asked for.
    expect(performance.now() - sent).toBeLessThan(2_500);
    t.probe.open(`${key}#1`);
    await first;
    for (const { response } of await Promise.all(waiters)) expect(response.status).toBe(201);
    expect(waitersOf(t.app)).toBe(0);
  });

  it('a waiter whose client hangs up is freed, and claims nothing', async () => {
    const key = newKey();
    const { first } = await startFirst('/waiting', 'waits', key, { gate: key });
    const payload = JSON.stringify({ gate: key });
    const req = httpRequest({
      host: '127.0.0.1',
      port: t.server.address().port,
      method: 'POST',
      path: '/waiting',
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
        'idempotency-key': key,
        prefer: 'wait=10',
      },
    });
    req.on('error', () => undefined);
    req.end(payload);
    await waitFor(async () => waitersOf(t.app) === 1);
    req.destroy();
    await waitFor(async () => waitersOf(t.app) === 0, 2000);
    t.probe.open(`${key}#1`);
    expect((await first).status).toBe(201);
    expect(t.probe.ran('waits')).toBeGreaterThan(0);
  });
});

describe.each(ADAPTERS)('two instances on one database (%s)', (adapter) => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let n = 0;
  const newKey = () => `two-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    const options = {
      controllers: [WaitingController],
      module: { request: { scope: () => 'waiting' } },
    };
    a = await createTestApp(adapter, db, options);
    b = await createTestApp(adapter, db, options);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  const post = (t: TestApp, path: string, key: string, body: WaitBody, prefer?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return (prefer ? req.set('Prefer', prefer) : req).send(body);
  };

  it.each([
    ['/waiting', 'waits'],
    ['/waiting/tx', 'tx'],
  ])(
    'on %s, a waiter on B is woken by NOTIFY when A completes (not by a 30 s poll)',
    async (path, counter) => {
      // B's listening connection opens at its first request of a route that may wait.
      await post(b, path, newKey(), {});
      await waitFor(async () => typeOrmWakeUpsOf(b.app)?.status === 'listening');
      b.probe.runs.clear();
      const key = newKey();
      const body = { gate: key };
      const first = post(a, path, key, body).then((response) => response);
      await waitFor(async () => a.probe.ran(counter) === 1);
      const waiter = post(b, path, key, body, 'wait=10').then((response) => ({
        response,
        at: performance.now(),
      }));
      await waitFor(async () => waitersOf(b.app) === 1);
      const opened = performance.now();
      a.probe.open(`${key}#1`);
      const original = await first;
      const { response, at } = await waiter;
      note(`NOTIFY ${path}`, at - opened);
      expect(response.status).toBe(201);
      expect(response.headers['idempotent-replayed']).toBe('true');
      expect(response.text).toBe(original.text);
      // Not the last look at its 10 s deadline (a loaded host may take a few seconds to answer).
      expect(at - opened).toBeLessThan(5_000);
      expect(a.probe.ran(counter)).toBe(1);
      expect(b.probe.ran(counter)).toBe(0);
      a.probe.runs.clear();
      b.probe.runs.clear();
    },
  );

  it('a release on A wakes the waiter on B, which runs the handler itself', async () => {
    const key = newKey();
    const first = post(a, '/waiting', key, { gate: key }).then((response) => response);
    await waitFor(async () => a.probe.ran('waits') === 1);
    const waiter = post(b, '/waiting', key, { gate: key }, 'wait=10').then((r) => r);
    await waitFor(async () => waitersOf(b.app) === 1);
    b.probe.open(`${key}#2`);
    a.probe.fail(`${key}#1`);
    expect((await first).status).toBe(500);
    const response = await waiter;
    expect(response.status).toBe(201);
    expect(response.body.attempt).toBe(2);
    expect(b.probe.ran('waits')).toBe(1);
    a.probe.runs.clear();
    b.probe.runs.clear();
  });

  it('only routes that may wait announce, and never with the raw key', async () => {
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (message) => heard.push(message.payload ?? ''));
    try {
      await listener.query(`LISTEN ${wakeUpChannelOf('idempotency_records')}`);
      const plain = newKey();
      expect((await post(a, '/waiting/no-wait', plain, {})).status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(heard).toEqual([]);
      const waiting = newKey();
      expect((await post(a, '/waiting', waiting, {})).status).toBe(201);
      await waitFor(async () => heard.length === 1);
      expect(heard).toEqual([wakeTokenOf('waiting', waiting)]);
      expect(heard[0]).not.toContain(waiting);
    } finally {
      await listener.end();
    }
  });
});

describe.each(ADAPTERS)('a completion that announces nothing (%s)', (adapter) => {
  // A completes the key on a route without wait (no NOTIFY); on B the same route may wait (the
  // module's wait, polled every 0.2 s), and B listens: its poll finds the completion.
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let n = 0;
  const newKey = () => `silent-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await createTestApp(adapter, db, {
      controllers: [WaitingController],
      module: { request: { scope: () => 'waiting' } },
    });
    b = await createTestApp(adapter, db, {
      controllers: [WaitingController],
      module: {
        request: { scope: () => 'waiting' },
        wait: { maxSeconds: 10, pollIntervalSeconds: 0.2 },
      },
    });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('is found by the poll of a waiter on B while B listens for notifications', async () => {
    await request(b.server).post('/waiting/no-wait').set('Idempotency-Key', newKey()).send({});
    await waitFor(async () => typeOrmWakeUpsOf(b.app)?.status === 'listening');
    const key = newKey();
    const first = request(a.server)
      .post('/waiting/no-wait')
      .set('Idempotency-Key', key)
      .send({ gate: key })
      .then((response) => response);
    await waitFor(async () => a.probe.ran('no-wait') === 1);
    const waiter = request(b.server)
      .post('/waiting/no-wait')
      .set('Idempotency-Key', key)
      .set('Prefer', 'wait=10')
      .send({ gate: key })
      .then((response) => ({ response, at: performance.now() }));
    await waitFor(async () => waitersOf(b.app) === 1);
    const opened = performance.now();
    a.probe.open(`${key}#1`);
    const original = await first;
    const { response, at } = await waiter;
    expect(response.status).toBe(201);
    expect(response.headers['idempotent-replayed']).toBe('true');
    expect(response.text).toBe(original.text);
    // Not the last look at its 10 s deadline (a loaded host may take a few seconds to answer).
    expect(at - opened).toBeLessThan(5_000);
  });
});

describe.each(ADAPTERS)("two instances with typeOrmStore({ wakeUps: 'poll' }) (%s)", (adapter) => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    const options = {
      controllers: [WaitingController],
      module: { request: { scope: () => 'waiting' }, store: typeOrmStore({ wakeUps: 'poll' }) },
    };
    a = await createTestApp(adapter, db, options);
    b = await createTestApp(adapter, db, options);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  it('opens no listening connection; a waiter on B is woken by its poll', async () => {
    expect(typeOrmWakeUpsOf(b.app)).toBeUndefined();
    const key = `poll-${adapter}-${Date.now()}`;
    const post = (t: TestApp, prefer?: string) => {
      const req = request(t.server).post('/waiting/polled').set('Idempotency-Key', key);
      return (prefer ? req.set('Prefer', prefer) : req).send({ gate: key });
    };
    const first = post(a).then((response) => response);
    await waitFor(async () => a.probe.ran('polled') === 1);
    const waiter = post(b, 'wait=10').then((response) => ({ response, at: performance.now() }));
    await waitFor(async () => waitersOf(b.app) === 1);
    const opened = performance.now();
    a.probe.open(`${key}#1`);
    await first;
    const { response, at } = await waiter;
    note('poll 0.2 s', at - opened);
    expect(response.status).toBe(201);
    expect(response.headers['idempotent-replayed']).toBe('true');
    // Not the last look at its 10 s deadline (a loaded host may take a few seconds to answer).
    expect(at - opened).toBeLessThan(5_000);
    const listeners = await db.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
    );
    expect(listeners[0].n).toBe(0);
  });

  it('a waiter whose poll interval outlasts its wait looks once more at its deadline: the replay, not 409', async () => {
    // `/waiting` polls every 30 s: no poll comes within the 3 s wait, and nothing is pushed.
    const key = `last-look-${adapter}-${Date.now()}`;
    const post = (t: TestApp, prefer?: string) => {
      const req = request(t.server).post('/waiting').set('Idempotency-Key', key);
      return (prefer ? req.set('Prefer', prefer) : req).send({ gate: key });
    };
    const first = post(a).then((response) => response);
    await waitFor(async () => a.probe.ran('waits') === 1);
    const waiter = post(b, 'wait=3').then((response) => response);
    await waitFor(async () => waitersOf(b.app) === 1);
    a.probe.open(`${key}#1`);
    const original = await first;
    expect(original.status).toBe(201);
    const response = await waiter;
    expect(response.status).toBe(201);
    expect(response.headers['idempotent-replayed']).toBe('true');
    expect(response.headers['preference-applied']).toBe('wait=3');
    expect(response.text).toBe(original.text);
    expect(b.probe.ran('waits')).toBe(0);
  });
});

describe.each(ADAPTERS)('the listening connection (%s)', (adapter) => {
  let db: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  const logged: string[] = [];
  const logger = {
    log: (message: unknown) => logged.push(`log ${String(message)}`),
    warn: (message: unknown) => logged.push(`warn ${String(message)}`),
    error: (message: unknown) => logged.push(`error ${String(message)}`),
  };
  let n = 0;
  const newKey = () => `listen-${adapter}-${++n}-${Date.now()}`;
  const listeners = async () =>
    (
      await db.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`,
      )
    ).map((row) => row.pid);

  beforeAll(async () => {
    db = await createTestDatabase();
    const options = {
      controllers: [WaitingController],
      module: { request: { scope: () => 'waiting' } },
    };
    // Only B listens: A announces, and polls itself.
    a = await createTestApp(adapter, db, {
      ...options,
      module: { ...options.module, store: typeOrmStore({ wakeUps: 'poll' }) },
    });
    b = await createTestApp(adapter, db, { ...options, logger });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await db?.drop();
  });

  const post = (t: TestApp, path: string, key: string, prefer?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return (prefer ? req.set('Prefer', prefer) : req).send({ gate: key });
  };

  it('opens at the first request of a route that may wait, not before', async () => {
    expect(typeOrmWakeUpsOf(b.app)?.status).toBe('idle');
    expect(await listeners()).toEqual([]);
    const key = newKey();
    b.probe.open(`${key}#1`);
    expect((await post(b, '/waiting/no-wait', key)).status).toBe(201);
    expect(typeOrmWakeUpsOf(b.app)?.status).toBe('idle');
    const other = newKey();
    b.probe.open(`${other}#1`);
    expect((await post(b, '/waiting', other)).status).toBe(201);
    await waitFor(async () => typeOrmWakeUpsOf(b.app)?.status === 'listening');
    expect(await listeners()).toHaveLength(1);
  });

  it('when it fails: logged once, waiters poll, and a later request opens it again', async () => {
    const [pid] = await listeners();
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(async () => typeOrmWakeUpsOf(b.app)?.status === 'down');
    expect(logged.filter((line) => line.includes('listening connection failed'))).toHaveLength(1);

    // Meanwhile a waiter on B is woken by its poll.
    const key = newKey();
    const first = post(a, '/waiting/polled', key).then((response) => response);
    await waitFor(async () => a.probe.ran('polled') === 1);
    const waiter = post(b, '/waiting/polled', key, 'wait=10').then((response) => response);
    await waitFor(async () => waitersOf(b.app) === 1);
    a.probe.open(`${key}#1`);
    await first;
    expect((await waiter).headers['idempotent-replayed']).toBe('true');

    // Reopened by a request of a waiting route once the backoff (about 1 s) has passed.
    await waitFor(async () => {
      const next = newKey();
      b.probe.open(`${next}#1`);
      await post(b, '/waiting', next);
      return typeOrmWakeUpsOf(b.app)?.status === 'listening';
    }, 5000);
    expect(await listeners()).toHaveLength(1);
    expect(logged.filter((line) => line.includes('listening connection failed'))).toHaveLength(1);
    expect(logged).toContainEqual(expect.stringContaining('Wake-ups: listening again'));
  });

  it('is closed at shutdown', async () => {
    await b.close();
    b = undefined as never;
    expect(await listeners()).toEqual([]);
  });
});
