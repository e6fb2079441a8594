/**
 * `@IdempotentMessage({ ack: 'manual' })` when the library refuses a delivery after its handler
 * ran and settled it, on a real RabbitMQ (AMQP_URL) and PostgreSQL: the transactional handler
 * acknowledges its delivery, then its transaction fails at the commit (a deferred unique
 * constraint), so the library answers 503 `idempotency_store_unavailable`. It must neither ack
 * nor nack that delivery again: RabbitMQ closes the channel on an unknown delivery tag, its
 * unacknowledged messages go back to the queue (and are delivered again), and the channel takes
 * nothing more until it reconnects. Checked for an event (with another one in flight on the same
 * channel, which must not come back) and for a message (whose caller must get the refusal): the
 * consumer goes on with the next delivery, and the queue ends empty.
 *
 * A pure microservice has no HTTP adapter, so the rule that every e2e suite runs on Express and
 * Fastify does not apply here: there is one transport, RabbitMQ.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Controller } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import type { RmqContext } from '@nestjs/microservices';
import { firstValueFrom, timeout } from 'rxjs';
import { IdempotencyContext } from '../../lib';
import { IdempotentMessage } from '../../lib/microservices';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import {
  countEvents,
  queueName,
  rabbit,
  rmqClient,
  startConsumer,
} from '../fixtures/microservices';
import type { TestConsumer } from '../fixtures/microservices';
import { Probe } from '../fixtures/orders.controller';
import { waitFor } from '../fixtures/wait-for';

interface Capture {
  id: string;
  /** 'taken' fails the handler's transaction at its commit. */
  ref: string;
  /** Hold the run, its delivery unacknowledged, until the test opens the gate named by the id. */
  gate?: boolean;
}

const probe = new Probe();
/** When a refused event would go back on the queue, were the library to settle it (a 503). */
const RETRY_AFTER_SECONDS = 1;

@Controller()
class CaptureHandlers {
  constructor(private readonly idempotency: IdempotencyContext) {}

  @EventPattern<string>('captures.settled')
  @IdempotentMessage({
    key: { field: 'id' },
    ack: 'manual',
    execution: { transactional: true },
    errors: { retryAfterSeconds: RETRY_AFTER_SECONDS },
  })
  async settled(@Payload() capture: Capture, @Ctx() context: RmqContext) {
    await this.capture(capture, context);
  }

  @MessagePattern('captures.create')
  @IdempotentMessage({ key: { field: 'id' }, ack: 'manual', execution: { transactional: true } })
  async create(@Payload() capture: Capture, @Ctx() context: RmqContext) {
    await this.capture(capture, context);
    return { ref: capture.ref };
  }

  /** Writes the capture in the handler's transaction and acknowledges the delivery. */
  private async capture(capture: Capture, context: RmqContext): Promise<void> {
    probe.count(capture.id);
    if (capture.gate) await probe.gate(capture.id);
    await this.idempotency.entityManager.query('INSERT INTO captures (ref) VALUES ($1)', [
      capture.ref,
    ]);
    context.getChannelRef().ack(context.getMessage());
  }
}

let db: TestDatabase;
let broker: Awaited<ReturnType<typeof rabbit>>;
const queues: string[] = [];
const consumers: TestConsumer[] = [];

/** A consumer acking by hand (noAck: false) on a queue of its own. */
async function consumer(): Promise<{ queue: string; c: TestConsumer }> {
  const queue = queueName('settled');
  queues.push(queue);
  const c = await startConsumer(db, queue, { controllers: [CaptureHandlers], noAck: false });
  consumers.push(c);
  return { queue, c };
}

const refs = async () =>
  (await db.query("SELECT ref FROM captures WHERE ref <> 'taken' ORDER BY id")).map((r) => r.ref);

beforeAll(async () => {
  db = await createTestDatabase();
  await db.query(
    `CREATE TABLE captures (id serial PRIMARY KEY,
       ref text NOT NULL CONSTRAINT captures_ref UNIQUE DEFERRABLE INITIALLY DEFERRED)`,
  );
  await db.query("INSERT INTO captures (ref) VALUES ('taken')");
  broker = await rabbit();
}, 30_000);

afterAll(async () => {
  for (const c of consumers) await c.close().catch(() => undefined);
  await broker?.close(...queues);
  await db?.drop();
});

describe('@IdempotentMessage({ ack: "manual" }): a delivery the handler settled is not settled again', () => {
  it('an event refused after its handler acknowledged it: no redelivery, the consumer goes on', async () => {
    const { queue, c } = await consumer();
    // An event in flight on the same channel, not acknowledged yet.
    await broker.publish(queue, 'captures.settled', { id: 'ev-held', ref: 'ev-held', gate: true });
    await waitFor(async () => probe.ran('ev-held') === 1);
    await broker.publish(queue, 'captures.settled', { id: 'ev-taken', ref: 'taken' });
    await waitFor(
      async () => countEvents(c.events, 'rejected', 'idempotency_store_unavailable') === 1,
    );
    expect(probe.ran('ev-taken')).toBe(1);
    // A refused event of its kind is put back after Retry-After: twice that passes, so a second
    // settlement, had there been one, has closed the channel by now.
    await sleep(2 * RETRY_AFTER_SECONDS * 1000);
    probe.open('ev-held');
    await waitFor(async () => countEvents(c.events, 'executed') === 1);

    // The same channel takes the next event.
    await broker.publish(queue, 'captures.settled', { id: 'ev-next', ref: 'ev-next' });
    await waitFor(async () => countEvents(c.events, 'executed') === 2);
    // Each delivered once: none came back to be refused or replayed.
    expect(countEvents(c.events, 'rejected')).toBe(1);
    expect(countEvents(c.events, 'replayed')).toBe(0);
    expect([probe.ran('ev-held'), probe.ran('ev-taken'), probe.ran('ev-next')]).toEqual([1, 1, 1]);
    expect(await refs()).toEqual(['ev-held', 'ev-next']);
    await c.close();
    expect(await broker.messageCount(queue)).toBe(0);
  });

  it('a message refused after its handler acknowledged it: its caller gets 503, the next is answered', async () => {
    const { queue, c } = await consumer();
    const client = await rmqClient(queue);
    try {
      const ask = (capture: Capture) =>
        firstValueFrom(client.send('captures.create', capture).pipe(timeout(10_000))).catch(
          (error) => ({ error }),
        );
      const refused: any = await ask({ id: 'msg-taken', ref: 'taken' });
      expect(refused.error).toMatchObject({ status: 503, code: 'idempotency_store_unavailable' });
      expect(probe.ran('msg-taken')).toBe(1);

      expect(await ask({ id: 'msg-next', ref: 'msg-next' })).toEqual({ ref: 'msg-next' });
      expect(probe.ran('msg-next')).toBe(1);
      expect(await refs()).toContain('msg-next');
      await c.close();
      expect(await broker.messageCount(queue)).toBe(0);
    } finally {
      await client.close();
    }
  });
});
