/**
 * `@IdempotentMessage()` on `@MessagePattern()` handlers, on a real RabbitMQ (AMQP_URL) and
 * PostgreSQL: a request sent again with its key gets the stored result and the handler runs
 * once (counted in rows and runs), whatever its style (a value, a promise, an observable,
 * transactional); concurrent duplicates run it once and get 409 `idempotency_key_in_use`; the
 * key with other data gets 422 `idempotency_key_reused`; a handler that throws gives the key
 * back; with the store unreachable nothing runs (503), and a transactional run whose connection is
 * cut is refused with 503 too and runs again on the next send; the key can come from a header; plain
 * `@Idempotent()` on a message handler refuses. Every error is an `RpcException` whose error
 * is `{ status, code, title, detail }`.
 *
 * A pure microservice has no HTTP adapter, so the rule that every e2e suite runs on Express and
 * Fastify does not apply here: there is one transport, RabbitMQ.
 */
import { Controller } from '@nestjs/common';
import { Ctx, MessagePattern, Payload, RmqRecordBuilder } from '@nestjs/microservices';
import type { ClientRMQ, RmqContext } from '@nestjs/microservices';
import { DataSource } from 'typeorm';
import { firstValueFrom, of } from 'rxjs';
import { IdempotencyContext, Idempotent } from '../../lib';
import { IdempotentMessage } from '../../lib/microservices';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { DatabaseOutage } from '../fixtures/database-outage';
import { queueName, rabbit, rmqClient, startConsumer } from '../fixtures/microservices';
import type { TestConsumer } from '../fixtures/microservices';
import { Probe } from '../fixtures/orders.controller';
import { waitFor } from '../fixtures/wait-for';

interface Charge {
  idempotencyKey?: unknown;
  amount: number;
  /** Hold the run until the test opens the gate named by the key. */
  gate?: boolean;
  /** Throw on the first run of the key. */
  failFirst?: boolean;
}

@Controller()
class ChargesHandlers {
  constructor(
    private readonly probe: Probe,
    private readonly dataSource: DataSource,
    private readonly idempotency: IdempotencyContext,
  ) {}

  @MessagePattern('charges.create')
  @IdempotentMessage()
  async create(@Payload() charge: Charge) {
    const name = `create:${charge.idempotencyKey}`;
    this.probe.count(name);
    if (charge.gate) await this.probe.gate(String(charge.idempotencyKey));
    if (charge.failFirst && this.probe.ran(name) === 1) throw new Error('card network down');
    const [row] = await this.dataSource.query(
      'INSERT INTO charges (key, amount) VALUES ($1, $2) RETURNING id',
      [charge.idempotencyKey, charge.amount],
    );
    return { chargeId: row.id, amount: charge.amount, run: this.probe.ran(name) };
  }

  @MessagePattern('charges.quote')
  @IdempotentMessage()
  quote(@Payload() charge: Charge) {
    this.probe.count(`quote:${charge.idempotencyKey}`);
    return { fee: charge.amount / 100, run: this.probe.ran(`quote:${charge.idempotencyKey}`) };
  }

  @MessagePattern('charges.split')
  @IdempotentMessage()
  split(@Payload() charge: Charge) {
    this.probe.count(`split:${charge.idempotencyKey}`);
    const run = this.probe.ran(`split:${charge.idempotencyKey}`);
    return of({ part: 1, run }, { part: 2, run });
  }

  @MessagePattern('charges.refund')
  @IdempotentMessage({ execution: { transactional: true } })
  async refund(@Payload() charge: Charge) {
    const name = `refund:${charge.idempotencyKey}`;
    this.probe.count(name);
    await this.idempotency.entityManager.query(
      'INSERT INTO charges (key, amount) VALUES ($1, $2)',
      [charge.idempotencyKey, -charge.amount],
    );
    if (charge.failFirst && this.probe.ran(name) === 1) throw new Error('ledger closed');
    return { refunded: charge.amount, run: this.probe.ran(name) };
  }

  @MessagePattern('charges.cut')
  @IdempotentMessage({ execution: { transactional: true } })
  async cut(@Payload() charge: Charge) {
    const name = `cut:${charge.idempotencyKey}`;
    this.probe.count(name);
    const manager = this.idempotency.entityManager;
    await manager.query('INSERT INTO charges (key, amount) VALUES ($1, $2)', [
      charge.idempotencyKey,
      charge.amount,
    ]);
    // The first run loses its transaction's connection, as a failover or a proxy reset does.
    if (this.probe.ran(name) === 1)
      await manager.query('SELECT pg_terminate_backend(pg_backend_pid())');
    return { charged: charge.amount, run: this.probe.ran(name) };
  }

  @MessagePattern('charges.by-header')
  @IdempotentMessage({ key: { header: 'X-Idempotency-Key' } })
  byHeader(@Payload() charge: Charge) {
    this.probe.count('by-header');
    return { amount: charge.amount, run: this.probe.ran('by-header') };
  }

  @MessagePattern('charges.nested')
  @IdempotentMessage({ key: (data: { meta: { id: string } }) => data.meta.id })
  nested() {
    this.probe.count('nested');
    return { run: this.probe.ran('nested') };
  }

  @MessagePattern('charges.statement')
  @IdempotentMessage({ responses: { maxResponseBytes: 64 } })
  statement(@Payload() charge: Charge) {
    this.probe.count('statement');
    return { lines: 'x'.repeat(charge.amount), run: this.probe.ran('statement') };
  }

  @MessagePattern('charges.plain')
  @Idempotent()
  plain() {
    this.probe.count('plain');
    return { ran: true };
  }
}

/** On a server with `noAck: false`: the handler acknowledges the requests it runs. */
@Controller()
class ManualAckHandlers {
  constructor(private readonly probe: Probe) {}

  @MessagePattern('charges.create')
  @IdempotentMessage({ ack: 'manual' })
  async create(@Payload() charge: Charge, @Ctx() context: RmqContext) {
    this.probe.count(`manual:${charge.idempotencyKey}`);
    if (charge.gate) await this.probe.gate(`manual:${charge.idempotencyKey}`);
    context.getChannelRef().ack(context.getMessage());
    return { amount: charge.amount, run: this.probe.ran(`manual:${charge.idempotencyKey}`) };
  }
}

let db: TestDatabase;
let consumer: TestConsumer;
let client: ClientRMQ;
let probe: Probe;
const queue = queueName('messages');

/** Sends a request and waits for its reply, or for its error as `{ error }`. */
async function send(pattern: string, data: unknown): Promise<any> {
  try {
    return await firstValueFrom(client.send(pattern, data));
  } catch (error) {
    return { error };
  }
}

const rows = async (key: string) =>
  (await db.query('SELECT amount FROM charges WHERE key = $1 ORDER BY id', [key])).map(
    (r) => r.amount,
  );
/** The key's record as its row says: the call's kind, its pattern, its state. */
const records = async (key: string) =>
  db.query(
    `SELECT method, path, status, response_status AS "responseStatus"
       FROM idempotency_records WHERE idempotency_key = $1`,
    [key],
  );
const completed = async (key: string) =>
  (await records(key)).filter((r) => r.status === 'completed').length;

beforeAll(async () => {
  db = await createTestDatabase();
  await db.query('CREATE TABLE charges (id serial PRIMARY KEY, key text, amount integer)');
  probe = new Probe();
  consumer = await startConsumer(db, queue, {
    controllers: [ChargesHandlers],
    providers: [{ provide: Probe, useValue: probe }],
  });
  client = await rmqClient(queue);
}, 30_000);

afterAll(async () => {
  await client?.close();
  await consumer?.close();
  const broker = await rabbit();
  await broker.close(queue);
  await db?.drop();
});

describe('@IdempotentMessage() on @MessagePattern() handlers (RabbitMQ)', () => {
  it('a request sent again with its key gets the stored result; the handler ran once', async () => {
    const first = await send('charges.create', { idempotencyKey: 'k-1', amount: 500 });
    const again = await send('charges.create', { idempotencyKey: 'k-1', amount: 500 });
    const third = await send('charges.create', { amount: 500, idempotencyKey: 'k-1' });
    expect(first).toEqual({ chargeId: expect.any(Number), amount: 500, run: 1 });
    expect(again).toEqual(first);
    expect(third).toEqual(first);
    expect(probe.ran('create:k-1')).toBe(1);
    expect(await rows('k-1')).toEqual([500]);
    expect(await records('k-1')).toEqual([
      { method: 'MESSAGE', path: 'charges.create', status: 'completed', responseStatus: 200 },
    ]);
    expect(consumer.events).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'replayed', key: 'k-1', route: 'MESSAGE charges.create' }),
      ]),
    );
  });

  it('every handler style: a value, a promise, an observable (its last value)', async () => {
    expect(await send('charges.quote', { idempotencyKey: 'q-1', amount: 250 })).toEqual({
      fee: 2.5,
      run: 1,
    });
    expect(await send('charges.quote', { idempotencyKey: 'q-1', amount: 250 })).toEqual({
      fee: 2.5,
      run: 1,
    });
    const split = await send('charges.split', { idempotencyKey: 's-1', amount: 1 });
    expect(split).toEqual({ part: 2, run: 1 });
    expect(await send('charges.split', { idempotencyKey: 's-1', amount: 1 })).toEqual(split);
    expect([probe.ran('quote:q-1'), probe.ran('split:s-1')]).toEqual([1, 1]);
  });

  it('concurrent duplicates: one runs, the others get 409 idempotency_key_in_use', async () => {
    const sent = Array.from({ length: 5 }, () =>
      send('charges.create', { idempotencyKey: 'k-race', amount: 700, gate: true }),
    );
    // The first runs and waits on its gate; every other delivery meets the key in flight.
    await waitFor(async () => probe.ran('create:k-race') === 1);
    await waitFor(
      async () =>
        consumer.events.filter((e) => e.type === 'rejected' && e.key === 'k-race').length === 4,
    );
    probe.open('k-race');
    const answers = await Promise.all(sent);
    const won = answers.filter((a) => !a.error);
    const refused = answers.filter((a) => a.error).map((a) => a.error);
    expect(won).toEqual([{ chargeId: expect.any(Number), amount: 700, run: 1 }]);
    expect(refused).toHaveLength(4);
    for (const error of refused) {
      expect(error).toEqual({
        status: 409,
        code: 'idempotency_key_in_use',
        title: expect.any(String),
        detail: expect.any(String),
        retryAfterSeconds: 1,
      });
    }
    expect(
      await send('charges.create', { idempotencyKey: 'k-race', amount: 700, gate: true }),
    ).toEqual(won[0]);
    expect(probe.ran('create:k-race')).toBe(1);
    expect(await rows('k-race')).toEqual([700]);
  });

  it('the key with other data gets 422 idempotency_key_reused; nothing runs', async () => {
    await send('charges.create', { idempotencyKey: 'k-reuse', amount: 100 });
    const reused = await send('charges.create', { idempotencyKey: 'k-reuse', amount: 999 });
    expect(reused).toEqual({
      error: {
        status: 422,
        code: 'idempotency_key_reused',
        title: expect.any(String),
        detail: expect.any(String),
      },
    });
    expect(reused.error.detail).toBe(
      'The key in the "idempotencyKey" field was already used with other data. Use a new key for a new message.',
    );
    expect(probe.ran('create:k-reuse')).toBe(1);
    expect(await rows('k-reuse')).toEqual([100]);
  });

  it('no key, or a key that cannot be one: 400, nothing runs', async () => {
    const missing = await send('charges.create', { amount: 1 });
    const invalid = await send('charges.create', { idempotencyKey: 'é'.repeat(3), amount: 1 });
    const object = await send('charges.create', { idempotencyKey: { id: 1 }, amount: 1 });
    expect(missing.error).toMatchObject({ status: 400, code: 'idempotency_key_missing' });
    expect(invalid.error).toMatchObject({ status: 400, code: 'idempotency_key_invalid' });
    expect(object.error).toMatchObject({ status: 400, code: 'idempotency_key_invalid' });
    // Each says where the message's key is, never an HTTP header, and never shows the key.
    expect(missing.error.detail).toBe(
      'This message needs a key in the "idempotencyKey" field: a unique value, the same on every retry of the message.',
    );
    expect(invalid.error.detail).toBe(
      'The key in the "idempotencyKey" field is invalid: the key is not 1 to 255 printable ASCII characters. Send 1 to 255 printable ASCII characters.',
    );
    expect(object.error.detail).toContain('the key is not a string or a number');
    expect(probe.ran('create:undefined')).toBe(0);
  });

  it('a handler that throws gives the key back: the next send runs it', async () => {
    const failed = await send('charges.create', {
      idempotencyKey: 'k-fail',
      amount: 300,
      failFirst: true,
    });
    // Nest's answer to an error that is not an RpcException.
    expect(failed).toEqual({ error: { status: 'error', message: 'Internal server error' } });
    expect(await completed('k-fail')).toBe(0);
    const retried = await send('charges.create', {
      idempotencyKey: 'k-fail',
      amount: 300,
      failFirst: true,
    });
    expect(retried).toEqual({ chargeId: expect.any(Number), amount: 300, run: 2 });
    expect(await rows('k-fail')).toEqual([300]);
  });

  it('transactional: the writes commit with the record, and a throw leaves no row', async () => {
    const failed = await send('charges.refund', {
      idempotencyKey: 'r-1',
      amount: 40,
      failFirst: true,
    });
    expect(failed.error).toEqual({ status: 'error', message: 'Internal server error' });
    expect(await rows('r-1')).toEqual([]);
    expect(await completed('r-1')).toBe(0);
    const refunded = await send('charges.refund', {
      idempotencyKey: 'r-1',
      amount: 40,
      failFirst: true,
    });
    expect(refunded).toEqual({ refunded: 40, run: 2 });
    expect(
      await send('charges.refund', { idempotencyKey: 'r-1', amount: 40, failFirst: true }),
    ).toEqual(refunded);
    expect(await rows('r-1')).toEqual([-40]);
    expect(probe.ran('refund:r-1')).toBe(2);
  });

  it('transactional: a run whose connection is cut gets the message form of 503, and the retry runs', async () => {
    const cut = await send('charges.cut', { idempotencyKey: 'c-1', amount: 70 });
    expect(cut.error).toMatchObject({
      status: 503,
      code: 'idempotency_store_unavailable',
      retryAfterSeconds: expect.any(Number),
    });
    expect(await rows('c-1')).toEqual([]);
    expect(await completed('c-1')).toBe(0);
    const retried = await send('charges.cut', { idempotencyKey: 'c-1', amount: 70 });
    expect(retried).toEqual({ charged: 70, run: 2 });
    expect(await send('charges.cut', { idempotencyKey: 'c-1', amount: 70 })).toEqual(retried);
    expect(await rows('c-1')).toEqual([70]);
    expect(probe.ran('cut:c-1')).toBe(2);
  });

  it('the key from a header (any case), with RmqRecordBuilder', async () => {
    const record = (amount: number, name = 'x-idempotency-key') =>
      new RmqRecordBuilder({ amount }).setOptions({ headers: { [name]: 'h-1' } }).build();
    const first = await send('charges.by-header', record(5));
    expect(first).toEqual({ amount: 5, run: 1 });
    expect(await send('charges.by-header', record(5))).toEqual(first);
    expect(await send('charges.by-header', record(5, 'X-IDEMPOTENCY-KEY'))).toEqual(first);
    expect((await send('charges.by-header', record(6))).error.code).toBe('idempotency_key_reused');
    expect((await send('charges.by-header', { amount: 5 })).error).toMatchObject({
      status: 400,
      code: 'idempotency_key_missing',
    });
    expect(probe.ran('by-header')).toBe(1);
  });

  it('the key from a function; one that throws refuses the message (400), nothing runs', async () => {
    const thrown = await send('charges.nested', { amount: 1 });
    expect(thrown.error).toMatchObject({ status: 400, code: 'idempotency_key_invalid' });
    expect(thrown.error.detail).toContain('the key function threw');
    expect(probe.ran('nested')).toBe(0);
    expect(await send('charges.nested', { meta: { id: 'n-1' } })).toEqual({ run: 1 });
    expect(await send('charges.nested', { meta: { id: 'n-1' } })).toEqual({ run: 1 });
  });

  it('a result over maxResponseBytes: the first caller gets it; a resend gets 409, not a second run', async () => {
    const first = await send('charges.statement', { idempotencyKey: 'st-1', amount: 200 });
    expect(first).toEqual({ lines: 'x'.repeat(200), run: 1 });
    const again = await send('charges.statement', { idempotencyKey: 'st-1', amount: 200 });
    expect(again.error).toMatchObject({ status: 409, code: 'idempotency_response_not_stored' });
    expect(probe.ran('statement')).toBe(1);
  });

  it('fails closed: with the store unreachable, the handler does not run (503)', async () => {
    const outage = await DatabaseOutage.of(db);
    await outage.begin();
    let answer: any;
    try {
      answer = await send('charges.quote', { idempotencyKey: 'q-down', amount: 100 });
    } finally {
      await outage.end();
    }
    expect(answer.error).toMatchObject({
      status: 503,
      code: 'idempotency_store_unavailable',
      retryAfterSeconds: expect.any(Number),
    });
    expect(probe.ran('quote:q-down')).toBe(0);
    // Once the store is back, the same message runs.
    await waitFor(async () => {
      const again = await send('charges.quote', { idempotencyKey: 'q-down', amount: 100 });
      return again.run === 1;
    }, 10_000);
  }, 20_000);

  it('plain @Idempotent() on a message handler refuses: it never runs unprotected', async () => {
    const answer = await send('charges.plain', { idempotencyKey: 'p-1' });
    expect(answer).toEqual({ error: { status: 'error', message: 'Internal server error' } });
    expect(probe.ran('plain')).toBe(0);
  });
});

describe('@IdempotentMessage({ ack: "manual" }) on a server with noAck: false', () => {
  it('every request the library answers itself is acknowledged: none is left on the queue', async () => {
    const manualQueue = queueName('messages-manual');
    const manual = await startConsumer(db, manualQueue, {
      controllers: [ManualAckHandlers],
      providers: [{ provide: Probe, useValue: probe }],
      noAck: false,
    });
    const manualClient = await rmqClient(manualQueue);
    const broker = await rabbit();
    try {
      const ask = (data: Charge) =>
        firstValueFrom(manualClient.send('charges.create', data)).catch((error) => ({ error }));
      const first = ask({ idempotencyKey: 'm-1', amount: 8, gate: true });
      await waitFor(async () => probe.ran('manual:m-1') === 1);
      // In flight (409), then the key with other data (422), then no key (400).
      const inUse: any = await ask({ idempotencyKey: 'm-1', amount: 8, gate: true });
      const reused: any = await ask({ idempotencyKey: 'm-1', amount: 9 });
      const missing: any = await ask({ amount: 8 });
      probe.open('manual:m-1');
      expect(await first).toEqual({ amount: 8, run: 1 });
      // A resend, answered from the record.
      expect(await ask({ idempotencyKey: 'm-1', amount: 8, gate: true })).toEqual({
        amount: 8,
        run: 1,
      });
      expect([inUse.error.code, reused.error.code, missing.error.code]).toEqual([
        'idempotency_key_in_use',
        'idempotency_key_reused',
        'idempotency_key_missing',
      ]);
      expect(probe.ran('manual:m-1')).toBe(1);
      await manual.close();
      expect(await broker.messageCount(manualQueue)).toBe(0);
    } finally {
      await manualClient.close();
      await manual.close();
      await broker.close(manualQueue);
    }
  });
});
