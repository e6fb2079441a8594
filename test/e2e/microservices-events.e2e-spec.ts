/**
 * `@IdempotentMessage()` on `@EventPattern()` handlers, on a real RabbitMQ (AMQP_URL) and
 * PostgreSQL, each case on a queue of its own that must end empty once its consumers are gone
 * (every delivery acknowledged or rejected, none left unacked): an event published twice, or
 * redelivered for real (a consumer that dies before acking, a handler that puts it back), runs
 * the handler once and the duplicate is acknowledged by the library; two consumers (two Nest
 * microservices on one queue) receiving duplicates at once run it once in total; a handler that
 * throws gives the key back, so the redelivery runs it, and its transactional writes are rolled
 * back; an event refused for good (no key, its key used with other data) is rejected, not
 * requeued; with Nest's automatic acks duplicates run once too; the key can come from a
 * function (RabbitMQ's message id).
 *
 * A pure microservice has no HTTP adapter, so the rule that every e2e suite runs on Express and
 * Fastify does not apply here: there is one transport, RabbitMQ.
 */
import { Controller } from '@nestjs/common';
import type { Type } from '@nestjs/common';
import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import type { RmqContext } from '@nestjs/microservices';
import { IdempotencyContext } from '../../lib';
import { IdempotentMessage } from '../../lib/microservices';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { countEvents, queueName, rabbit, startConsumer } from '../fixtures/microservices';
import type { TestConsumer } from '../fixtures/microservices';
import { Probe } from '../fixtures/orders.controller';
import { waitFor } from '../fixtures/wait-for';

interface Settlement {
  eventId?: string;
  amount: number;
  /** Hold the run until the test opens the gate named by the event id. */
  gate?: boolean;
  /** On the first run: put the delivery back on the queue and throw. */
  failFirst?: boolean;
  /** Finish without acknowledging (the consumer dies before it acks). */
  keepUnacked?: boolean;
  /** Finish by putting the delivery back on the queue instead of acknowledging it. */
  requeue?: boolean;
}

const probe = new Probe();

@Controller()
class SettlementsHandlers {
  constructor(private readonly idempotency: IdempotencyContext) {}

  // <string>: without it, Nest 12 types a named event's handler as (data, ...args: unknown[]).
  @EventPattern<string>('payments.settled')
  @IdempotentMessage({
    key: { field: 'eventId' },
    ack: 'manual',
    execution: { transactional: true },
    errors: { retryAfterSeconds: 1 },
  })
  async settled(@Payload() event: Settlement, @Ctx() context: RmqContext) {
    const name = event.eventId!;
    probe.count(name);
    const channel = context.getChannelRef();
    const message = context.getMessage();
    if (event.gate) await probe.gate(name);
    await this.idempotency.entityManager.query(
      'INSERT INTO settlements (event_id, amount) VALUES ($1, $2)',
      [name, event.amount],
    );
    if (event.failFirst && probe.ran(name) === 1) {
      channel.nack(message, false, true);
      throw new Error('ledger unavailable');
    }
    if (event.requeue) channel.nack(message, false, true);
    else if (!event.keepUnacked) channel.ack(message);
  }

  @EventPattern<string>('payments.refunded')
  @IdempotentMessage({
    key: (_data, context: RmqContext) => context.getMessage().properties.messageId,
    ack: 'manual',
  })
  refunded(@Payload() event: Settlement, @Ctx() context: RmqContext) {
    probe.count(`refund:${event.amount}`);
    context.getChannelRef().ack(context.getMessage());
  }
}

/** The same handler on a server that acknowledges every delivery itself (Nest's default). */
@Controller()
class AutoAckHandlers {
  @EventPattern('payments.settled')
  @IdempotentMessage({ key: { field: 'eventId' } })
  settled(@Payload() event: Settlement) {
    probe.count(`auto:${event.eventId}`);
  }
}

let db: TestDatabase;
let broker: Awaited<ReturnType<typeof rabbit>>;
const queues: string[] = [];
const consumers: TestConsumer[] = [];

/** A new queue for one case, deleted at the end. */
function newQueue(): string {
  const queue = queueName('events');
  queues.push(queue);
  return queue;
}

/** A consumer of `queue` acking by hand (noAck: false), sharing the file's probe. */
async function consumer(queue: string, controllers: Type[] = [SettlementsHandlers], noAck = false) {
  const started = await startConsumer(db, queue, {
    controllers,
    noAck,
    providers: [{ provide: Probe, useValue: probe }],
  });
  consumers.push(started);
  return started;
}

const rows = async (eventId: string) =>
  (await db.query('SELECT amount FROM settlements WHERE event_id = $1', [eventId])).map(
    (r) => r.amount,
  );

/** Closes the consumers, then counts what is left in the queue: what nobody acknowledged. */
async function leftAfterClosing(queue: string, ...of: TestConsumer[]): Promise<number> {
  for (const c of of) await c.close();
  return broker.messageCount(queue);
}

beforeAll(async () => {
  db = await createTestDatabase();
  await db.query(
    'CREATE TABLE settlements (id serial PRIMARY KEY, event_id text NOT NULL, amount integer)',
  );
  broker = await rabbit();
}, 30_000);

afterAll(async () => {
  for (const c of consumers) await c.close().catch(() => undefined);
  await broker?.close(...queues);
  await db?.drop();
});

describe('@IdempotentMessage() on @EventPattern() handlers (RabbitMQ, manual acks)', () => {
  it('an event published twice runs once; the duplicate is acknowledged', async () => {
    const queue = newQueue();
    const c = await consumer(queue);
    await broker.publish(queue, 'payments.settled', { eventId: 'e-1', amount: 10 });
    await broker.publish(queue, 'payments.settled', { eventId: 'e-1', amount: 10 });
    await waitFor(async () => countEvents(c.events, 'replayed') === 1);
    expect(probe.ran('e-1')).toBe(1);
    expect(await rows('e-1')).toEqual([10]);
    expect(await leftAfterClosing(queue, c)).toBe(0);
  });

  it('a consumer that dies before acking: the redelivery is acknowledged, not run', async () => {
    const queue = newQueue();
    const first = await consumer(queue);
    await broker.publish(queue, 'payments.settled', {
      eventId: 'e-dies',
      amount: 20,
      keepUnacked: true,
    });
    await waitFor(async () => countEvents(first.events, 'executed') === 1);
    const second = await consumer(queue);
    // Its channel closes with the delivery unacknowledged: RabbitMQ redelivers it to the other.
    await first.close();
    await waitFor(async () => countEvents(second.events, 'replayed') === 1);
    expect(probe.ran('e-dies')).toBe(1);
    expect(await rows('e-dies')).toEqual([20]);
    expect(await leftAfterClosing(queue, second)).toBe(0);
  });

  it('a delivery the handler put back on the queue is redelivered, and acknowledged', async () => {
    const queue = newQueue();
    const c = await consumer(queue);
    await broker.publish(queue, 'payments.settled', {
      eventId: 'e-requeued',
      amount: 30,
      requeue: true,
    });
    // Redelivered at once, perhaps while its record is being completed (then after Retry-After).
    await waitFor(async () => countEvents(c.events, 'replayed') === 1);
    expect(probe.ran('e-requeued')).toBe(1);
    expect(await rows('e-requeued')).toEqual([30]);
    expect(await leftAfterClosing(queue, c)).toBe(0);
  });

  it('two consumers on one queue receiving duplicates run the handler once in total', async () => {
    const queue = newQueue();
    const a = await consumer(queue);
    const b = await consumer(queue);
    const copies = 6;
    for (let i = 0; i < copies; i++) {
      await broker.publish(queue, 'payments.settled', { eventId: 'e-two', amount: 40, gate: true });
    }
    // One runs and waits on its gate; the others meet the key in flight and go back on the queue.
    await waitFor(async () => probe.ran('e-two') === 1);
    await waitFor(
      async () =>
        countEvents(a.events, 'rejected', 'idempotency_key_in_use') +
          countEvents(b.events, 'rejected', 'idempotency_key_in_use') >=
        copies - 1,
    );
    // Both consumers took deliveries (RabbitMQ deals them out in turn).
    expect(a.events.length).toBeGreaterThan(0);
    expect(b.events.length).toBeGreaterThan(0);
    probe.open('e-two');
    await waitFor(
      async () =>
        countEvents(a.events, 'replayed') + countEvents(b.events, 'replayed') === copies - 1,
    );
    expect(probe.ran('e-two')).toBe(1);
    expect(await rows('e-two')).toEqual([40]);
    expect(await leftAfterClosing(queue, a, b)).toBe(0);
  });

  it('a handler that throws gives the key back: the redelivery runs it; its writes rolled back', async () => {
    const queue = newQueue();
    const c = await consumer(queue);
    await broker.publish(queue, 'payments.settled', {
      eventId: 'e-fails',
      amount: 50,
      failFirst: true,
    });
    await waitFor(async () => countEvents(c.events, 'executed') === 1);
    expect(probe.ran('e-fails')).toBe(2);
    // The first run's insert was rolled back with its transaction; the second's committed.
    expect(await rows('e-fails')).toEqual([50]);
    expect(await leftAfterClosing(queue, c)).toBe(0);
  });

  it('an event refused for good (no key, a key used with other data) is rejected, not requeued', async () => {
    const queue = newQueue();
    const c = await consumer(queue);
    await broker.publish(queue, 'payments.settled', { eventId: 'e-once', amount: 60 });
    await waitFor(async () => countEvents(c.events, 'executed') === 1);
    await broker.publish(queue, 'payments.settled', { amount: 60 });
    await broker.publish(queue, 'payments.settled', { eventId: 'e-once', amount: 61 });
    await waitFor(async () => countEvents(c.events, 'rejected') === 2);
    expect(c.events.filter((e) => e.type === 'rejected').map((e: any) => e.code)).toEqual([
      'idempotency_key_missing',
      'idempotency_key_reused',
    ]);
    expect(probe.ran('e-once')).toBe(1);
    expect(await rows('e-once')).toEqual([60]);
    expect(await leftAfterClosing(queue, c)).toBe(0);
  });

  it('the key from a function: RabbitMQ message ids', async () => {
    const queue = newQueue();
    const c = await consumer(queue);
    await broker.publish(queue, 'payments.refunded', { amount: 7 }, { messageId: 'm-1' });
    await broker.publish(queue, 'payments.refunded', { amount: 7 }, { messageId: 'm-1' });
    await broker.publish(queue, 'payments.refunded', { amount: 7 }, { messageId: 'm-2' });
    await waitFor(
      async () =>
        countEvents(c.events, 'executed') === 2 && countEvents(c.events, 'replayed') === 1,
    );
    expect(probe.ran('refund:7')).toBe(2);
    expect(await leftAfterClosing(queue, c)).toBe(0);
  });
});

describe('@IdempotentMessage() on @EventPattern() handlers (RabbitMQ, automatic acks)', () => {
  it('an event published twice runs once', async () => {
    const queue = newQueue();
    const c = await consumer(queue, [AutoAckHandlers], true);
    await broker.publish(queue, 'payments.settled', { eventId: 'e-auto', amount: 1 });
    // The second only once the first has run: delivered while the first is still in flight, an
    // event with automatic acks is refused (key in use), not replayed.
    await waitFor(async () => countEvents(c.events, 'executed') === 1);
    await broker.publish(queue, 'payments.settled', { eventId: 'e-auto', amount: 1 });
    await waitFor(async () => countEvents(c.events, 'replayed') === 1);
    expect(probe.ran('auto:e-auto')).toBe(1);
    expect(await leftAfterClosing(queue, c)).toBe(0);
  });
});
