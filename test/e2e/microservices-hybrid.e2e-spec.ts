/**
 * A hybrid app (HTTP and a RabbitMQ microservice in one Nest application, `connectMicroservice`),
 * on Express and Fastify: `@Idempotent()` HTTP routes and `@IdempotentMessage()` handlers share
 * the module and the store. The module's `scope` reads an HTTP header, and a message never meets
 * it (a message's scope is its own, the pattern by default); the same key over HTTP and in a
 * message names two calls; both replay.
 */
import { Body, Controller, Post } from '@nestjs/common';
import { MessagePattern, Payload, Transport } from '@nestjs/microservices';
import type { ClientRMQ } from '@nestjs/microservices';
import { firstValueFrom } from 'rxjs';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { IdempotentMessage } from '../../lib/microservices';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { AMQP_URL, queueName, rabbit, rmqClient } from '../fixtures/microservices';
import { Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

@Controller('transfers')
class TransfersController {
  constructor(private readonly probe: Probe) {}

  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    this.probe.count('http');
    return { over: 'http', amount: body.amount, run: this.probe.ran('http') };
  }

  @MessagePattern('transfers.create')
  @IdempotentMessage()
  fromMessage(@Payload() data: { idempotencyKey: string; amount: number }) {
    this.probe.count('message');
    return { over: 'message', amount: data.amount, run: this.probe.ran('message') };
  }
}

describe.each(ADAPTERS)('a hybrid app (HTTP and RabbitMQ) on %s', (adapter) => {
  let db: TestDatabase;
  let app: TestApp;
  let client: ClientRMQ;
  const queue = queueName(`hybrid-${adapter}`);

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await createTestApp(adapter, db, {
      controllers: [TransfersController],
      // An HTTP scope: it would throw on anything without headers.
      module: {
        request: { scope: (req: { headers: Record<string, string> }) => req.headers['x-tenant'] },
      },
      configure: (nest) => {
        nest.connectMicroservice({
          transport: Transport.RMQ,
          options: { urls: [AMQP_URL], queue, queueOptions: { durable: false } },
        });
      },
    });
    await app.app.startAllMicroservices();
    client = await rmqClient(queue);
  }, 30_000);

  afterAll(async () => {
    await client?.close();
    await app?.close();
    const broker = await rabbit();
    await broker.close(queue);
    await db?.drop();
  });

  it('both run once per key and replay; the same key over HTTP and in a message names two calls', async () => {
    const post = () =>
      request(app.server)
        .post('/transfers')
        .set('Idempotency-Key', 'same-key')
        .set('X-Tenant', 'acme')
        .send({ amount: 5 });
    const send = () =>
      firstValueFrom(client.send('transfers.create', { idempotencyKey: 'same-key', amount: 5 }));

    const http = await post();
    expect(http.status).toBe(201);
    expect(http.body).toEqual({ over: 'http', amount: 5, run: 1 });
    expect(await send()).toEqual({ over: 'message', amount: 5, run: 1 });

    const replayed = await post();
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.body).toEqual(http.body);
    expect(await send()).toEqual({ over: 'message', amount: 5, run: 1 });
    expect([app.probe.ran('http'), app.probe.ran('message')]).toEqual([1, 1]);

    const rows = await db.query(
      'SELECT scope, method, path FROM idempotency_records WHERE idempotency_key = $1 ORDER BY method',
      ['same-key'],
    );
    expect(rows).toEqual([
      { scope: 'message:transfers.create', method: 'MESSAGE', path: 'transfers.create' },
      { scope: 'acme', method: 'POST', path: '/transfers' },
    ]);
  });
});
