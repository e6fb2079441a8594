/**
 * `@IdempotentMessage({ key: { header } })` on a real NATS server (NATS_URL, 127.0.0.1:4222) and
 * PostgreSQL: the key header is found whatever the case its sender wrote it in, as on RabbitMQ
 * (a NATS header's own `get()` matches names exactly). Skipped, saying why, where the NATS client
 * package of the Nest line under test or a NATS server is missing.
 *
 * A pure microservice has no HTTP adapter: the Express/Fastify rule does not apply here.
 */
import { randomBytes } from 'node:crypto';
import { Controller, Module } from '@nestjs/common';
import type { INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import type { ClientProxy } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { firstValueFrom } from 'rxjs';
import { IdempotencyModule } from '../../lib';
import { IdempotentMessage } from '../../lib/microservices';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { findNats } from '../fixtures/nats';
import { Probe } from '../fixtures/orders.controller';
import { testTypeOrmModule } from '../fixtures/test-app';

const found = findNats();
/** A subject of its own for this run, so runs side by side never meet. */
const SUBJECT = `nest-idempotency.charges.${randomBytes(4).toString('hex')}`;

@Controller()
class NatsCharges {
  constructor(private readonly probe: Probe) {}

  @MessagePattern(SUBJECT)
  @IdempotentMessage({ key: { header: 'x-idempotency-key' } })
  charge(@Payload() charge: { amount: number }) {
    this.probe.count('charge');
    return { amount: charge.amount, run: this.probe.ran('charge') };
  }
}

if (!('url' in found)) {
  describe.skip(`@IdempotentMessage() on NATS (${found.missing})`, () => {
    it('is skipped', () => undefined);
  });
} else {
  describe('@IdempotentMessage() on NATS: a key header in any case', () => {
    let db: TestDatabase;
    let server: INestMicroservice;
    const probe = new Probe();
    const clients: ClientProxy[] = [];

    beforeAll(async () => {
      db = await createTestDatabase();
      @Module({
        imports: [testTypeOrmModule(db.url), IdempotencyModule.forRoot({ purge: false })],
        controllers: [NatsCharges],
        providers: [{ provide: Probe, useValue: probe }],
      })
      class NatsModule {}
      const moduleRef = await Test.createTestingModule({ imports: [NatsModule] }).compile();
      server = moduleRef.createNestMicroservice({
        transport: Transport.NATS,
        options: { servers: [found.url] },
        logger: false,
      });
      await server.listen();
    }, 30_000);

    afterAll(async () => {
      for (const client of clients) await client.close();
      await server?.close();
      await db?.drop();
    });

    /** Sends a request whose headers are `headers`, written as given; its reply or `{ error }`. */
    const send = async (headers: Record<string, string>, amount: number): Promise<any> => {
      const client = ClientProxyFactory.create({
        transport: Transport.NATS,
        options: { servers: [found.url], headers },
      });
      clients.push(client);
      try {
        return await firstValueFrom(client.send(SUBJECT, { amount }));
      } catch (error) {
        return { error };
      }
    };

    it('a key sent as X-Idempotency-Key runs once; a resend in another case gets the stored result', async () => {
      const first = await send({ 'X-Idempotency-Key': 'nats-1' }, 5);
      expect(first).toEqual({ amount: 5, run: 1 });
      expect(await send({ 'x-idempotency-key': 'nats-1' }, 5)).toEqual(first);
      expect(await send({ 'X-IDEMPOTENCY-KEY': 'nats-1' }, 5)).toEqual(first);
      expect((await send({ 'X-Idempotency-Key': 'nats-1' }, 6)).error).toMatchObject({
        status: 422,
        code: 'idempotency_key_reused',
      });
      expect((await send({ 'X-Other': 'nats-1' }, 5)).error).toMatchObject({
        status: 400,
        code: 'idempotency_key_missing',
      });
      expect(probe.ran('charge')).toBe(1);
    });
  });
}
