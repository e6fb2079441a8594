/**
 * The run of a handler that is not an HTTP route, through Nest's real microservice pipeline
 * (guards, interceptors, exception handling; context type `rpc`) on a transport held in this
 * process, against PostgreSQL. What the entry points for brokers and GraphQL build on: the call
 * transport a decorator sets says where the key is and how refusals reach the caller; the rest
 * is the run of `@Idempotent()` routes. (No HTTP adapter is involved, so there is no Express or
 * Fastify variant; the RabbitMQ and GraphQL suites run the real transports.)
 */
import { Controller, Injectable } from '@nestjs/common';
import type { ExecutionContext, INestMicroservice } from '@nestjs/common';
import { MessagePattern, Payload, RpcException, Server } from '@nestjs/microservices';
import type { CustomTransportStrategy } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { lastValueFrom } from 'rxjs';
import type { Observable } from 'rxjs';
import { idempotentCall } from '../../lib/calls/idempotency-call-transport';
import type { IdempotencyCallTransport } from '../../lib/calls/idempotency-call-transport';
import { IdempotencyContext, IdempotencyEvents, IdempotencyModule, Idempotent } from '../../lib';
import type { IdempotencyEvent, IdempotencyRouteOptions } from '../../lib';
import { parseIdempotencyKey } from '../../lib/utils/parse-idempotency-key';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { testTypeOrmModule } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

/** A transport whose calls the test makes by hand: `dispatch(pattern, data)`. */
class InProcessServer extends Server implements CustomTransportStrategy {
  listen(callback: () => void): void {
    callback();
  }
  close(): void {}
  on(): any {}
  unwrap<T>(): T {
    return undefined as T;
  }
  async dispatch(pattern: string, data: unknown): Promise<unknown> {
    const handler = this.getHandlerByPattern(pattern)!;
    return lastValueFrom(
      this.transformToObservable(await handler(data, {})) as Observable<unknown>,
    );
  }
}

/** The key is the message's `id`; refusals are RpcExceptions carrying the problem. */
const transport: IdempotencyCallTransport = {
  read: (context: ExecutionContext) => {
    const data = context.switchToRpc().getData();
    return {
      key: data?.id === undefined ? { kind: 'missing' } : parseIdempotencyKey([String(data.id)]),
      keyPlace: { call: 'message', where: 'its id' },
      method: 'MESSAGE',
      path: 'pay',
      payload: data,
      scopeSource: data,
      namespace: 'message',
    };
  },
  refuse: (problem) =>
    new RpcException({ code: problem.code, status: problem.getStatus(), title: problem.title }),
};

/** `@Idempotent()` with the test's transport: what a transport's own decorator does. */
function IdempotentTestMessage(options: IdempotencyRouteOptions = {}): MethodDecorator {
  return idempotentCall(Idempotent(options), transport);
}

@Injectable()
class Ledger {
  runs = new Map<string, number>();
  gates = new Map<string, Promise<void>>();
  /** Ids whose next run throws (a declined card), once. */
  failing = new Set<string>();
  failOnce(id: string) {
    if (this.failing.delete(id)) throw new RpcException({ code: 'card_declined' });
  }
  ran(id: string) {
    return this.runs.get(id) ?? 0;
  }
  count(id: string) {
    this.runs.set(id, this.ran(id) + 1);
  }
}

@Controller()
class PaymentsHandler {
  constructor(
    private readonly ledger: Ledger,
    private readonly idempotency: IdempotencyContext,
  ) {}

  @MessagePattern('pay')
  @IdempotentTestMessage()
  async pay(@Payload() data: { id: string; amount: number }) {
    this.ledger.count(data.id);
    await this.ledger.gates.get(data.id);
    this.ledger.failOnce(data.id);
    return { paid: data.amount, at: new Date(0), run: this.ledger.ran(data.id) };
  }

  @MessagePattern('pay-tx')
  @IdempotentTestMessage({ execution: { transactional: true } })
  async payInTransaction(@Payload() data: { id: string; amount: number }) {
    this.ledger.count(data.id);
    await this.idempotency.entityManager.query(
      'INSERT INTO orders (amount, note) VALUES ($1, $2)',
      [data.amount, data.id],
    );
    this.ledger.failOnce(data.id);
    return { paid: data.amount };
  }

  @MessagePattern('plain')
  @Idempotent()
  plain(@Payload() data: { id: string }) {
    this.ledger.count(data.id);
    return { ok: true };
  }

  @MessagePattern('unprotected')
  notCovered(@Payload() data: { id: string }) {
    this.ledger.count(data.id);
    return { ok: true };
  }
}

describe('an @Idempotent() handler that is not an HTTP route (a message on a transport)', () => {
  let db: TestDatabase;
  let app: INestMicroservice;
  let server: InProcessServer;
  let ledger: Ledger;
  const events: IdempotencyEvent[] = [];
  let n = 0;
  const newId = () => `call-${++n}-${Date.now()}`;
  const rowsOf = async (id: string) =>
    (
      await db.query<{ n: number }>('SELECT count(*)::int AS n FROM orders WHERE note = $1', [id])
    )[0].n;
  const recordOf = async (id: string) =>
    (
      await db.query<{ status: string; method: string; path: string }>(
        'SELECT status, method, path FROM idempotency_records WHERE idempotency_key = $1',
        [id],
      )
    )[0];
  const rejection = (promise: Promise<unknown>) =>
    promise.then(
      () => {
        throw new Error('expected the call to be refused');
      },
      (error: unknown) => error,
    );

  beforeAll(async () => {
    db = await createTestDatabase();
    server = new InProcessServer();
    const moduleRef = await Test.createTestingModule({
      imports: [testTypeOrmModule(db.url), IdempotencyModule.forRoot({ purge: false })],
      controllers: [PaymentsHandler],
      providers: [Ledger],
    }).compile();
    app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
    await app.init();
    await app.listen();
    ledger = app.get(Ledger);
    app.get(IdempotencyEvents).subscribe((event) => events.push(event));
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('runs the handler once and answers every later call with the key from the record', async () => {
    const id = newId();
    const first = await server.dispatch('pay', { id, amount: 5 });
    const again = await server.dispatch('pay', { id, amount: 5 });
    // The first caller gets the value as returned; a retry gets it as JSON brings it back.
    expect(first).toEqual({ paid: 5, at: new Date(0), run: 1 });
    expect(again).toEqual({ paid: 5, at: new Date(0).toISOString(), run: 1 });
    expect(ledger.ran(id)).toBe(1);
    expect(await recordOf(id)).toEqual({ status: 'completed', method: 'MESSAGE', path: 'pay' });
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'replayed', key: id, route: 'MESSAGE pay' }),
    );
  });

  it('refuses the key with another payload (422) through the transport, and runs nothing', async () => {
    const id = newId();
    await server.dispatch('pay', { id, amount: 5 });
    const error = (await rejection(server.dispatch('pay', { id, amount: 6 }))) as any;
    expect(error).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    expect(ledger.ran(id)).toBe(1);
  });

  it('refuses a duplicate while the first call runs (409), then replays its value', async () => {
    const id = newId();
    let open!: () => void;
    ledger.gates.set(id, new Promise<void>((resolve) => (open = resolve)));
    const first = server.dispatch('pay', { id, amount: 7 });
    // Until its handler runs (it holds the key), not a fixed 50 ms a loaded host may not give it.
    await waitFor(async () => ledger.ran(id) === 1);
    const during = (await rejection(server.dispatch('pay', { id, amount: 7 }))) as any;
    expect(during).toMatchObject({ code: 'idempotency_key_in_use', status: 409 });
    open();
    expect(await first).toMatchObject({ paid: 7, run: 1 });
    expect(await server.dispatch('pay', { id, amount: 7 })).toMatchObject({ paid: 7, run: 1 });
    expect(ledger.ran(id)).toBe(1);
  });

  it('gives the key back when the handler throws: its error reaches the caller, the next call runs it', async () => {
    const id = newId();
    ledger.failing.add(id);
    const failed = (await rejection(server.dispatch('pay', { id, amount: 8 }))) as any;
    expect(failed).toMatchObject({ code: 'card_declined' });
    expect((await recordOf(id))?.status).toBe('released');
    expect(await server.dispatch('pay', { id, amount: 8 })).toMatchObject({ paid: 8, run: 2 });
    expect(ledger.ran(id)).toBe(2);
  });

  it("commits a transactional handler's writes with its record, or neither", async () => {
    const id = newId();
    ledger.failing.add(id);
    await rejection(server.dispatch('pay-tx', { id, amount: 9 }));
    expect(await rowsOf(id)).toBe(0);
    expect(await server.dispatch('pay-tx', { id, amount: 9 })).toEqual({ paid: 9 });
    expect(await server.dispatch('pay-tx', { id, amount: 9 })).toEqual({ paid: 9 });
    expect(await rowsOf(id)).toBe(1);
    expect(ledger.ran(id)).toBe(2);
  });

  it('refuses a call without a key (the transport names it) and runs nothing', async () => {
    const error = (await rejection(server.dispatch('pay', { amount: 1 }))) as any;
    expect(error).toMatchObject({ code: 'idempotency_key_missing', status: 400 });
    expect(error.title).toBe('The message has no idempotency key');
  });

  it('fails closed on @Idempotent() alone, which cannot know where a message keeps its key', async () => {
    const id = newId();
    await expect(server.dispatch('plain', { id })).rejects.toBeDefined();
    expect(ledger.ran(id)).toBe(0);
    // A handler the library does not cover is left alone.
    expect(await server.dispatch('unprotected', { id })).toEqual({ ok: true });
  });
});
