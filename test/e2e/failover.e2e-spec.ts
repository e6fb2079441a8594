/**
 * A PostgreSQL failover under the library: a primary and a streaming replica of the test's own
 * (never the machine's cluster), the apps behind an endpoint that moves to the promoted replica.
 * What survives depends on replication, and the history checker says what broke.
 */
import { Body, Controller, Injectable, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent, IdempotencyContext } from '../../lib';
import { typeOrmStore } from '../../lib/storage/typeorm';
import { checkHistory } from '../chaos/history/check-history';
import { HistoryRecorder } from '../chaos/history/history-recorder';
import { MovingEndpoint } from '../chaos/failover/moving-endpoint';
import { PostgresPair, query } from '../chaos/failover/postgres-pair';
import type { Replication } from '../chaos/failover/postgres-pair';
import { cancelStandbyWaits } from '../chaos/failover/standby-waits';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';

jest.setTimeout(120_000);

/**
 * The store's timeout: a stalled standby's commit is cut off by it (the stall case below), and a
 * completion whose connection died is sent again for as long (long enough for a failover here).
 */
const STORE_TIMEOUT_SECONDS = 10;

/** The run's history, and a provider whose charges are keyed by the derived key. */
@Injectable()
class Ledger {
  history = new HistoryRecorder();
  readonly charges = new Set<string>();
  /** The plain route's gate, and its handler's runs. */
  gate = gate();
  started = gate();
  runs = 0;

  charge(derivedKey: string, key: string): void {
    const created = !this.charges.has(derivedKey);
    this.charges.add(derivedKey);
    this.history.providerCharge(derivedKey, created, key);
  }
}

/** A gate the plain route's handler waits at, opened by the test. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** A plain (not transactional) route whose handler waits at the ledger's gate. */
@Controller('plain')
class PlainController {
  constructor(
    private readonly ledger: Ledger,
    private readonly idempotency: IdempotencyContext,
  ) {}

  @Post()
  @Idempotent()
  async pay(@Body() body: { amount: number }) {
    const key = this.idempotency.identity!.key;
    const ended = this.ledger.history.handlerStart(key, 'app', body);
    this.ledger.runs++;
    try {
      this.ledger.started.open();
      await this.ledger.gate.opened;
      return { payment: key, amount: body.amount };
    } finally {
      ended();
    }
  }
}

@Controller('payments')
class PaymentsController {
  constructor(
    private readonly ledger: Ledger,
    private readonly idempotency: IdempotencyContext,
  ) {}

  @Post()
  @Idempotent({ execution: { transactional: true } })
  async pay(@Body() body: { amount: number }) {
    const key = this.idempotency.identity!.key;
    const ended = this.ledger.history.handlerStart(key, 'app', body);
    try {
      this.ledger.charge(this.idempotency.derivedKey('charge'), key);
      const [row] = await this.idempotency.entityManager.query(
        'INSERT INTO orders (amount, note) VALUES ($1, $2) RETURNING id',
        [body.amount, key],
      );
      return { payment: row.id, amount: body.amount };
    } finally {
      ended();
    }
  }

  /** The same charge on a route that completes outside a transaction. */
  @Post('plain')
  @Idempotent()
  payPlain(@Body() body: { amount: number }) {
    const key = this.idempotency.identity!.key;
    const ended = this.ledger.history.handlerStart(key, 'app', body);
    this.ledger.charge(this.idempotency.derivedKey('charge'), key);
    ended();
    return { charged: body.amount };
  }
}

interface Rig {
  pair: PostgresPair;
  endpoint: MovingEndpoint;
  app: TestApp;
  ledger: Ledger;
}

async function startRig(adapter: AdapterName, replication: Replication): Promise<Rig> {
  const pair = await PostgresPair.create(replication);
  const endpoint = await MovingEndpoint.start(pair.primaryPort);
  const url = `postgres://postgres@127.0.0.1:${endpoint.port}/postgres`;
  const app = await createTestApp(adapter, { url } as TestDatabase, {
    databaseUrl: url,
    controllers: [PaymentsController, PlainController],
    providers: [Ledger],
    module: { replayCache: false, store: typeOrmStore({ timeoutSeconds: STORE_TIMEOUT_SECONDS }) },
  });
  await pair.waitForReplica();
  return { pair, endpoint, app, ledger: app.app.get(Ledger) };
}

async function stopRig(rig: Rig | undefined): Promise<void> {
  await rig?.app.close().catch(() => undefined);
  await rig?.endpoint.close();
  await rig?.pair.remove();
}

/** Sends one attempt and records it in the history. */
async function send(rig: Rig, key: string, body = { amount: 500 }, path = '/payments') {
  const startedAt = rig.ledger.history.now();
  const response = await request(rig.app.server).post(path).set('Idempotency-Key', key).send(body);
  rig.ledger.history.answer(
    { key, client: 'client', startedAt, request: body },
    {
      status: response.status,
      contentType: response.headers['content-type'],
      replayed: response.headers['idempotent-replayed'] === 'true',
      retryAfter: response.headers['retry-after'],
      body: response.text,
    },
  );
  return response;
}

/** Sends until the answer is final (the store may refuse while the endpoint moves). */
async function pay(rig: Rig, key: string, path = '/payments') {
  let last: request.Response | undefined;
  for (let attempt = 0; attempt < 40; attempt++) {
    last = await send(rig, key, undefined, path);
    if (last.status < 500 && last.status !== 409) return { response: last };
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`no final answer for ${key}; the last: ${last?.status} ${last?.text}`);
}

/** The promoted replica takes the endpoint. */
async function failOver(rig: Rig): Promise<void> {
  await rig.pair.failOver();
  rig.endpoint.moveTo(rig.pair.replicaPort);
}

const handlerRuns = (rig: Rig, key: string) =>
  rig.ledger.history.events.filter((event) => event.type === 'handler-start' && event.key === key)
    .length;

/** Waits until a backend of the primary waits for the synchronous standby (a commit). */
async function commitWaitingForStandby(rig: Rig): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const rows = await query(
      rig.pair.url('primary'),
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
    );
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('no commit waited for the standby');
}

const violationsOf = (rig: Rig) =>
  checkHistory(rig.ledger.history.events, { settleBoundMs: 10_000 }).map(
    (violation) => `${violation.rule}: ${violation.message}`,
  );

describe.each(ADAPTERS)('a PostgreSQL failover on %s', (adapter) => {
  let rig: Rig | undefined;

  afterEach(async () => {
    await stopRig(rig);
    rig = undefined;
  });

  it('with asynchronous replication, loses an answer the replica never got, and the retry runs again', async () => {
    rig = await startRig(adapter, 'async');
    // The replica falls behind: what the primary commits now exists nowhere else.
    await rig.pair.stop('replica');
    const first = await pay(rig, 'pay-async');
    expect(first.response.status).toBe(201);
    await failOver(rig);

    const retry = await pay(rig, 'pay-async');
    expect(retry.response.status).toBe(201);
    expect(retry.response.headers['idempotent-replayed']).toBeUndefined();
    expect(violationsOf(rig)).toEqual([
      'no-contradiction: the handler ran again with the same body after a final answer was seen',
    ]);
    // A provider keyed by the derived key charged once all the same.
    expect(rig.ledger.charges.size).toBe(1);
  });

  it('with synchronous replication, every stored answer survives the failover and replays', async () => {
    rig = await startRig(adapter, 'sync');
    const answers: { response: request.Response }[] = [];
    for (const key of ['pay-sync-1', 'pay-sync-2', 'pay-sync-3']) answers.push(await pay(rig, key));
    await failOver(rig);

    for (const [index, key] of ['pay-sync-1', 'pay-sync-2', 'pay-sync-3'].entries()) {
      const retry = await pay(rig, key);
      expect(retry.response.status).toBe(201);
      expect(retry.response.headers['idempotent-replayed']).toBe('true');
      expect(retry.response.text).toBe(answers[index].response.text);
    }
    expect(violationsOf(rig)).toEqual([]);
    const rows = await query(rig.pair.url('replica'), 'SELECT count(*)::int AS n FROM orders');
    expect(rows[0].n).toBe(3);
  });

  it('with a synchronous standby that stalls, gives no final answer until the commit is replicated', async () => {
    rig = await startRig(adapter, 'sync');
    await rig.pair.stop('replica');
    // The commit waits for the standby; the store's deadline ends the wait for the client.
    const stalled = await send(rig, 'pay-stall');
    expect(stalled.status).toBe(503);
    expect(stalled.body.code).toBe('idempotency_store_unavailable');
    await failOver(rig);

    const retry = await pay(rig, 'pay-stall');
    expect(retry.response.status).toBe(201);
    expect(violationsOf(rig)).toEqual([]);
    expect(rig.ledger.charges.size).toBe(1);
  });

  it('with a synchronous standby that stalls and waits that are cancelled, sends no final answer, and the retry runs once after the failover', async () => {
    rig = await startRig(adapter, 'sync');
    await rig.pair.stop('replica');
    const stopCancelling = cancelStandbyWaits(rig.pair);
    // The COMMIT returns with a WARNING: the answer stands on the primary alone.
    const stalled = await send(rig, 'pay-cancelled').finally(stopCancelling);
    expect(stalled.status).toBe(503);
    expect(stalled.body.code).toBe('idempotency_store_unavailable');
    expect(stalled.headers['retry-after']).toBeDefined();
    await failOver(rig);

    // The standby never got the record nor the order: the handler runs once there.
    const retry = await pay(rig, 'pay-cancelled');
    expect(retry.response.status).toBe(201);
    expect(retry.response.headers['idempotent-replayed']).toBeUndefined();
    expect(handlerRuns(rig, 'pay-cancelled')).toBe(2);
    expect(violationsOf(rig)).toEqual([]);
    expect(rig.ledger.charges.size).toBe(1);
    const rows = await query(rig.pair.url('replica'), 'SELECT count(*)::int AS n FROM orders');
    expect(rows[0].n).toBe(1);
  });

  it('with a synchronous standby that stalls and waits that are cancelled, replays the stored answer once the standby is back', async () => {
    rig = await startRig(adapter, 'sync');
    await rig.pair.stop('replica');
    const stopCancelling = cancelStandbyWaits(rig.pair);
    const stalled = await send(rig, 'pay-plain', undefined, '/payments/plain').finally(
      stopCancelling,
    );
    expect(stalled.status).toBe(503);
    expect(stalled.body.code).toBe('idempotency_store_unavailable');
    expect(stalled.headers['retry-after']).toBeDefined();
    await rig.pair.start('replica');
    await rig.pair.waitForReplica();

    const retry = await pay(rig, 'pay-plain', '/payments/plain');
    expect(retry.response.status).toBe(201);
    expect(retry.response.headers['idempotent-replayed']).toBe('true');
    expect(retry.response.body).toEqual({ charged: 500 });
    expect(handlerRuns(rig, 'pay-plain')).toBe(1);
    expect(violationsOf(rig)).toEqual([]);
  });

  it('with synchronous replication, a plain route whose completion dies with the primary still stores its answer on the promoted standby', async () => {
    rig = await startRig(adapter, 'sync');
    const first = send(rig, 'plain-crash', undefined, '/plain');
    // The claim is replicated; then the standby stops, and the completion waits for it.
    await rig.ledger.started.opened;
    await rig.pair.stop('replica');
    rig.ledger.gate.open();
    await commitWaitingForStandby(rig);
    // The primary crashes with the completion's commit unreplicated; the completion is sent
    // again once the endpoint has moved to the promoted standby.
    await failOver(rig);

    const answer = await first;
    expect(answer.status).toBe(201);
    expect(answer.headers['idempotent-replayed']).toBeUndefined();
    const rows = await query(
      rig.pair.url('replica'),
      "SELECT status FROM idempotency_records WHERE idempotency_key = 'plain-crash'",
    );
    expect(rows).toEqual([{ status: 'completed' }]);
    const retry = await pay(rig, 'plain-crash', '/plain');
    expect(retry.response.status).toBe(201);
    expect(retry.response.headers['idempotent-replayed']).toBe('true');
    expect(retry.response.text).toBe(answer.text);
    expect(rig.ledger.runs).toBe(1);
    expect(violationsOf(rig)).toEqual([]);
  });
});
