/**
 * A staged job's delivery whose COMMIT comes back with the WARNING of a cancelled wait for the
 * synchronous standby (SQLSTATE 01000): the delivery stands on the primary alone. It is reported
 * as `job_unconfirmed` (not `job_failed`); on the primary the job is not delivered again and the
 * drainer goes on; after a failover to the standby that
 * never got the delivery, the job is delivered there once. A primary and a streaming replica of
 * the test's own, behind an endpoint that moves (test/chaos/failover/).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { IdempotencyCommitUnconfirmedError } from '../../lib/storage/commit-unconfirmed.error';
import { IdempotencyJobs } from '../../lib/phases';
import type { DrainSummary } from '../../lib/phases';
import { typeOrmStore } from '../../lib/storage/typeorm';
import { MovingEndpoint } from '../chaos/failover/moving-endpoint';
import { PostgresPair, query } from '../chaos/failover/postgres-pair';
import { cancelStandbyWaits } from '../chaos/failover/standby-waits';
import type { TestDatabase } from '../fixtures/database';
import { TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';

jest.setTimeout(120_000);

const JOBS = 'idempotency_records_jobs';

interface Rig {
  pair: PostgresPair;
  endpoint: MovingEndpoint;
  app: TestApp;
  hooks: TransferHooks;
  jobs: IdempotencyJobs;
}

/**
 * The transfers fixture on a synchronous pair; its `notify` job handler also writes a row of
 * `job_effects` (no unique key: a second delivery shows as a second row) in the drainer's
 * transaction. The drainer runs only when the test drains.
 */
async function startRig(adapter: AdapterName): Promise<Rig> {
  const pair = await PostgresPair.create('sync');
  const endpoint = await MovingEndpoint.start(pair.primaryPort);
  const url = `postgres://postgres@127.0.0.1:${endpoint.port}/postgres`;
  const app = await createTestApp(adapter, { url } as TestDatabase, {
    ...TRANSFERS,
    databaseUrl: url,
    module: { replayCache: false, store: typeOrmStore({ timeoutSeconds: 10 }) },
    phases: {
      completer: false,
      jobs: { enabled: false, maxAttempts: 5, backoffSeconds: 0, maxBackoffSeconds: 0 },
    },
  });
  await query(pair.url('primary'), 'CREATE TABLE job_effects (job_key text NOT NULL)');
  const hooks = app.app.get(TransferHooks);
  hooks.onNotify = async (job, manager) => {
    await manager.query('INSERT INTO job_effects (job_key) VALUES ($1)', [job.key]);
  };
  await pair.waitForReplica();
  return { pair, endpoint, app, hooks, jobs: app.app.get(IdempotencyJobs) };
}

async function stopRig(rig: Rig | undefined): Promise<void> {
  await rig?.app.close().catch(() => undefined);
  await rig?.endpoint.close();
  await rig?.pair.remove();
}

/** A transfer whose last step stages one `notify` job; returns that job's key. */
async function stageJob(rig: Rig, key: string): Promise<string> {
  const response = await request(rig.app.server)
    .post('/transfers')
    .set('Idempotency-Key', key)
    .send({ amount: 700, to: 'someone' });
  expect(response.status).toBe(201);
  // The only job there: the earlier ones were delivered.
  const rows = await query(rig.pair.url('primary'), `SELECT job_key FROM ${JOBS}`);
  expect(rows).toHaveLength(1);
  return rows[0].job_key;
}

/** Drains until a drain goes through (the store may refuse while the endpoint moves). */
async function drain(rig: Rig): Promise<DrainSummary> {
  let last: unknown;
  for (let attempt = 0; attempt < 40; attempt++) {
    try {
      return await rig.jobs.drain();
    } catch (error) {
      last = error;
      await sleep(250);
    }
  }
  throw last;
}

/** Drains with the standby stopped and its waits cancelled: the delivery commits with a WARNING. */
async function drainUnconfirmed(rig: Rig): Promise<DrainSummary> {
  await rig.pair.stop('replica');
  const stopCancelling = cancelStandbyWaits(rig.pair);
  return rig.jobs.drain().finally(stopCancelling);
}

/** Effect rows per job key, and the job rows left, on one server. */
async function state(rig: Rig, server: 'primary' | 'replica') {
  const effects = await query(
    rig.pair.url(server),
    'SELECT job_key, count(*)::int AS n FROM job_effects GROUP BY job_key ORDER BY job_key',
  );
  const jobs = await query(rig.pair.url(server), `SELECT job_key, status FROM ${JOBS}`);
  return {
    effects: Object.fromEntries(effects.map((row) => [row.job_key, row.n])),
    jobs: jobs.map((row) => row.job_key),
  };
}

const jobEvents = (rig: Rig) =>
  rig.app.events
    .filter((event) => event.type.startsWith('job_'))
    .map((event: any) => ({
      type: event.type,
      key: event.key,
      attempt: event.attempt,
      ...('error' in event ? { error: event.error?.name } : {}),
    }));

/** The event of a first delivery whose commit stood with the WARNING: its own, not a failure. */
const unconfirmed = (key: string) => ({
  type: 'job_unconfirmed',
  key,
  attempt: 1,
  error: IdempotencyCommitUnconfirmedError.name,
});

const deliveries = (rig: Rig, jobKey: string) =>
  rig.hooks.notified.filter((key) => key === jobKey).length;

describe.each(ADAPTERS)('a staged job whose delivery commit is unconfirmed, on %s', (adapter) => {
  let rig: Rig | undefined;

  afterEach(async () => {
    await stopRig(rig);
    rig = undefined;
  });

  it('is reported unconfirmed and not delivered again on the primary, and the drainer goes on', async () => {
    rig = await startRig(adapter);
    const job = await stageJob(rig, 'job-primary');

    // The delivery (its effect and the job's deletion) stands on the primary alone.
    expect(await drainUnconfirmed(rig)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(jobEvents(rig)).toEqual([unconfirmed(job)]);
    const reported = rig.app.events.find((event) => event.type === 'job_unconfirmed') as any;
    expect(reported.error.message).toMatch(/committed without confirmation/);
    expect(await state(rig, 'primary')).toEqual({ effects: { [job]: 1 }, jobs: [] });

    // The standby back, it gets the delivery; nothing is left to deliver again, and a later job
    // is delivered as usual.
    await rig.pair.start('replica');
    await rig.pair.waitForReplica();
    expect(await rig.jobs.drain()).toEqual({ delivered: 0, failed: 0, dead: 0 });
    expect(deliveries(rig, job)).toBe(1);
    const later = await stageJob(rig, 'job-later');
    expect(await rig.jobs.drain()).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(jobEvents(rig).slice(1)).toEqual([{ type: 'job_delivered', key: later, attempt: 1 }]);
    await rig.pair.waitForReplica();
    for (const server of ['primary', 'replica'] as const) {
      expect(await state(rig, server)).toEqual({ effects: { [job]: 1, [later]: 1 }, jobs: [] });
    }
    expect(deliveries(rig, job)).toBe(1);
    expect(deliveries(rig, later)).toBe(1);
  });

  it('is delivered once more, and its effect applied once, after a failover to the standby that missed it', async () => {
    rig = await startRig(adapter);
    const job = await stageJob(rig, 'job-failover');

    expect(await drainUnconfirmed(rig)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(await state(rig, 'primary')).toEqual({ effects: { [job]: 1 }, jobs: [] });
    await rig.pair.failOver();
    rig.endpoint.moveTo(rig.pair.replicaPort);

    // The promoted standby has the job, not its effect: the effect and the deletion were one
    // transaction, lost together.
    expect(await state(rig, 'replica')).toEqual({ effects: {}, jobs: [job] });
    expect(await drain(rig)).toEqual({ delivered: 1, failed: 0, dead: 0 });
    expect(await state(rig, 'replica')).toEqual({ effects: { [job]: 1 }, jobs: [] });
    expect(deliveries(rig, job)).toBe(2);
    // The claim that counted the first attempt was lost too: the standby's delivery is attempt 1.
    expect(jobEvents(rig)).toEqual([
      unconfirmed(job),
      { type: 'job_delivered', key: job, attempt: 1 },
    ]);
  });
});
