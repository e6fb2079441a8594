/**
 * FastifyResponseAdapter on a bare Fastify instance, without Nest: every reply reaches the sink
 * once (status, lower-case headers, exact bytes) before anything leaves; the client gets what
 * the sink decides; replays are exact and silence the route's later sends.
 */
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import fastify from 'fastify';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { FastifyResponseAdapter } from '../../lib/http/fastify-response.adapter';
import type { StoredResponse } from '../../lib/interfaces/idempotency-record.interface';
import {
  PROBLEM_503,
  RecordingResponseSink,
  UNWRITABLE,
  deferred,
  isPending,
} from '../fixtures/recording-response-sink';

const adapter = new FastifyResponseAdapter();
const NOT_UTF8 = Buffer.from([0xff, 0x00, 0x80, 0xc3, 0x28]);

let app: FastifyInstance;

afterEach(() => app.close());

/** An app whose one route captures its reply into `sink`, then runs `route` (synchronously). */
function appWith(sink: RecordingResponseSink, route: (reply: FastifyReply) => void) {
  app = fastify();
  app.post('/', (_request, reply) => {
    adapter.capture(reply, sink);
    route(reply);
  });
  return app;
}

/** What Fastify logged at warn level and above (a send on a sent reply is logged so). */
let warnings: string[];

/** An app whose one route writes `stored` as a replay, then runs `after`. */
function replayApp(stored: StoredResponse, after: (reply: FastifyReply) => void = () => {}) {
  warnings = [];
  app = fastify({ logger: { level: 'warn', stream: { write: (line) => warnings.push(line) } } });
  app.post('/', (_request, reply) => {
    try {
      adapter.writeReplay(reply, stored);
    } catch {
      reply.code(500).send(`replay failed; headers sent: ${reply.raw.headersSent}`);
      return;
    }
    after(reply);
  });
  return app;
}

describe('FastifyResponseAdapter', () => {
  describe('capture', () => {
    it.each([
      {
        route: 'reply.code(201).header(...).send(object)',
        write: (reply: FastifyReply) =>
          reply.code(201).header('X-Trace', 'abc').send({ id: 1, n: 'café' }),
        status: 201,
        headers: { 'x-trace': 'abc', 'content-type': 'application/json; charset=utf-8' },
        body: Buffer.from('{"id":1,"n":"café"}'),
      },
      {
        route: 'reply.send(string)',
        write: (reply: FastifyReply) => reply.send('café'),
        status: 200,
        headers: { 'content-type': 'text/plain; charset=utf-8' },
        body: Buffer.from('café'),
      },
      {
        route: 'reply.send(Buffer)',
        write: (reply: FastifyReply) => reply.send(NOT_UTF8),
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
        body: NOT_UTF8,
      },
      {
        route: 'reply.redirect(url, 303)',
        write: (reply: FastifyReply) => reply.redirect('/x', 303),
        status: 303,
        headers: { location: '/x' },
        body: Buffer.alloc(0),
      },
    ])('hands $route to the sink once, then sends it', async ({ write, status, headers, body }) => {
      const sink = new RecordingResponseSink();
      const response = await appWith(sink, write).inject({ method: 'POST', url: '/' });

      expect(sink.responses).toEqual([{ status, headers, body }]);
      expect(sink.ended).toBe(0);
      expect(response.statusCode).toBe(status);
      expect(response.headers['content-type']).toBe(headers['content-type']);
      expect(response.rawPayload).toEqual(body);
    });

    it("hands over what the route's response schema serializes (fields it does not declare are not stored)", async () => {
      const sink = new RecordingResponseSink();
      app = fastify();
      const schema = {
        response: { 201: { type: 'object', properties: { id: { type: 'string' } } } },
      };
      app.post('/', { schema }, (_request, reply) => {
        adapter.capture(reply, sink);
        reply.code(201).send({ id: 'pay_1', secret: 'never on the wire' });
      });
      const response = await app.inject({ method: 'POST', url: '/' });

      expect(response.body).toBe('{"id":"pay_1"}');
      expect(sink.responses).toEqual([
        {
          status: 201,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          body: Buffer.from('{"id":"pay_1"}'),
        },
      ]);
    });

    describe('an object Fastify serializes', () => {
      /** An object whose JSON counts how many times it was serialized. */
      const counted = () => {
        let serialized = 0;
        return { toJSON: () => ({ serialized: ++serialized }) };
      };

      it('is serialized once: the stored bytes are the bytes sent, and onSend hooks get them as text', async () => {
        const sink = new RecordingResponseSink();
        const onSend: unknown[] = [];
        appWith(sink, (reply) => reply.code(201).send(counted()));
        app.addHook('onSend', async (_request, _reply, payload) => {
          onSend.push(payload);
          return payload;
        });
        const response = await app.inject({ method: 'POST', url: '/' });

        expect(response.body).toBe('{"serialized":1}');
        expect(response.headers['content-type']).toBe('application/json; charset=utf-8');
        expect(sink.responses).toEqual([
          {
            status: 201,
            headers: { 'content-type': 'application/json; charset=utf-8' },
            body: Buffer.from('{"serialized":1}'),
          },
        ]);
        expect(onSend).toEqual(['{"serialized":1}']);
      });

      it("keeps a JSON content type of the route's own, as Fastify writes it", async () => {
        const sink = new RecordingResponseSink();
        const response = await appWith(sink, (reply) =>
          reply.type('application/problem+json').send({ id: 1 }),
        ).inject({ method: 'POST', url: '/' });

        expect(response.headers['content-type']).toBe('application/problem+json; charset=utf-8');
        expect(response.body).toBe('{"id":1}');
        expect(sink.responses[0]?.headers['content-type']).toBe(
          'application/problem+json; charset=utf-8',
        );
      });

      it("is serialized once by the reply's own serializer, not serialized again as text", async () => {
        const sink = new RecordingResponseSink();
        const response = await appWith(sink, (reply) =>
          reply.serializer((payload) => JSON.stringify(payload, null, 1)).send({ id: 1 }),
        ).inject({ method: 'POST', url: '/' });

        expect(response.body).toBe('{\n "id": 1\n}');
        expect(sink.responses[0]?.body).toEqual(Buffer.from('{\n "id": 1\n}'));
      });

      it("still goes through the route's preSerialization hooks (what they change is not stored)", async () => {
        const sink = new RecordingResponseSink();
        appWith(sink, (reply) => reply.code(201).send({ id: 1 }));
        app.addHook('preSerialization', async (_request, _reply, payload) => ({
          ...(payload as object),
          wrapped: true,
        }));
        const response = await app.inject({ method: 'POST', url: '/' });

        expect(response.body).toBe('{"id":1,"wrapped":true}');
        expect(sink.responses[0]?.body).toEqual(Buffer.from('{"id":1}'));
      });
    });

    it('hands over null as Fastify sends it: null, as JSON', async () => {
      const sink = new RecordingResponseSink();
      const response = await appWith(sink, (reply) => reply.send(null)).inject({
        method: 'POST',
        url: '/',
      });

      expect(response.body).toBe('null');
      expect(sink.responses).toEqual([
        {
          status: 200,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          body: Buffer.from('null'),
        },
      ]);
    });

    it('hands a payload Fastify cannot serialize over as undefined, and Fastify answers its own 500', async () => {
      const sink = new RecordingResponseSink();
      const response = await appWith(sink, (reply) => reply.code(201).send({ n: 10n })).inject({
        method: 'POST',
        url: '/',
      });

      expect(sink.responses).toEqual([undefined]);
      expect(response.statusCode).toBe(500);
    });

    it('hands a stream over as undefined, then sends it', async () => {
      const sink = new RecordingResponseSink();
      const response = await appWith(sink, (reply) =>
        reply.send(Readable.from([Buffer.from('a'), Buffer.from('b')])),
      ).inject({ method: 'POST', url: '/' });

      expect(sink.responses).toEqual([undefined]);
      expect(response.rawPayload).toEqual(Buffer.from('ab'));
    });

    it('sends the original when the sink answers with the same object', async () => {
      const sink = new RecordingResponseSink(async (outgoing) => outgoing);
      const response = await appWith(sink, (reply) => reply.code(201).send({ id: 1 })).inject({
        method: 'POST',
        url: '/',
      });

      expect(response.statusCode).toBe(201);
      expect(response.rawPayload).toEqual(Buffer.from('{"id":1}'));
    });

    it('sends nothing while the sink decides', async () => {
      const decision = deferred<undefined>();
      const sink = new RecordingResponseSink(() => decision.promise);
      let captured!: FastifyReply;
      const response = appWith(sink, (reply) => {
        captured = reply;
        reply.code(201).send({ id: 1 });
      }).inject({ method: 'POST', url: '/' });

      await sink.firstResponse;
      expect(captured.sent).toBe(false);
      expect(captured.raw.headersSent).toBe(false);
      expect(await isPending(response)).toBe(true);

      decision.resolve(undefined);
      expect((await response).statusCode).toBe(201);
    });

    it.each([
      ['reply.send(object)', (reply: FastifyReply) => reply.code(201).send({ id: 1 })],
      ['reply.redirect(url, 303)', (reply: FastifyReply) => reply.redirect('/x', 303)],
    ])(
      "sends a replacement decision instead of %s, without the route's headers",
      async (_, write) => {
        const sink = new RecordingResponseSink(async () => PROBLEM_503);
        const response = await appWith(sink, (reply) => {
          reply.header('Location', '/orders/1').header('ETag', '"v1"').header('X-Trace', 'abc');
          reply.header('Set-Cookie', 'session=abc');
          write(reply);
        }).inject({ method: 'POST', url: '/' });

        expect(response.statusCode).toBe(503);
        // Exactly the decision's headers, the route's own that describe no answer in
        // particular (X-Trace) and what Node adds to every response.
        const headers: Record<string, unknown> = { ...response.headers };
        for (const name of ['date', 'connection', 'keep-alive']) delete headers[name];
        expect(headers).toEqual({
          ...PROBLEM_503.headers,
          'x-trace': 'abc',
          'content-length': String(PROBLEM_503.body.length),
        });
        expect(response.rawPayload).toEqual(PROBLEM_503.body);
      },
    );

    it('answers 500 and reports it when the decision cannot be written', async () => {
      const rejections: unknown[] = [];
      const onRejection = (reason: unknown) => rejections.push(reason);
      process.on('unhandledRejection', onRejection);
      try {
        const sink = new RecordingResponseSink(async () => UNWRITABLE);
        const response = await appWith(sink, (reply) => reply.code(201).send({ id: 1 })).inject({
          method: 'POST',
          url: '/',
        });

        expect(response.statusCode).toBe(500);
        expect(response.headers['x-note']).toBeUndefined();
        expect(response.rawPayload).toEqual(Buffer.alloc(0));
        expect(sink.writeFailures).toEqual([expect.objectContaining({ code: 'ERR_INVALID_CHAR' })]);
      } finally {
        process.off('unhandledRejection', onRejection);
      }
      expect(rejections).toEqual([]);
    });

    // light-my-request (inject) closes its fake response before it counts as finished, so
    // this one runs on a real socket.
    it('reports a hijacked reply written to reply.raw only when it ended', async () => {
      const sink = new RecordingResponseSink();
      const closed = deferred();
      appWith(sink, (reply) => {
        reply.raw.on('close', () => closed.resolve());
        reply.hijack();
        reply.raw.end('raw');
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = app.server.address() as AddressInfo;

      const response = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST' });
      expect(await response.text()).toBe('raw');
      await closed.promise;
      expect(sink.responses).toEqual([]);
      expect(sink.ended).toBe(1);
    });
  });

  describe('writeReplay', () => {
    const stored: StoredResponse = {
      status: 201,
      headers: { 'content-type': 'application/octet-stream', location: '/orders/1' },
      body: NOT_UTF8,
    };

    it('sends the status, the stored headers, Idempotent-Replayed and the exact bytes', async () => {
      const response = await replayApp(stored).inject({ method: 'POST', url: '/' });

      expect(response.statusCode).toBe(201);
      expect(response.headers).toMatchObject({
        'content-type': 'application/octet-stream',
        location: '/orders/1',
        'idempotent-replayed': 'true',
      });
      expect(response.rawPayload).toEqual(NOT_UTF8);
    });

    it("makes the route's later sends and redirects no-ops", async () => {
      const later: boolean[] = [];
      const response = await replayApp(stored, (reply) => {
        later.push(reply.send('late') === reply);
        later.push(reply.redirect('/elsewhere', 302) === reply);
      }).inject({ method: 'POST', url: '/' });

      expect(later).toEqual([true, true]);
      expect(warnings).toEqual([]); // not even "Reply was already sent"
      expect(response.statusCode).toBe(201);
      expect(response.headers.location).toBe('/orders/1');
      expect(response.rawPayload).toEqual(NOT_UTF8);
    });

    it('sends an empty 303 without a content type', async () => {
      const response = await replayApp({
        status: 303,
        headers: { location: '/orders/1' },
        body: Buffer.alloc(0),
      }).inject({ method: 'POST', url: '/' });

      expect(response.statusCode).toBe(303);
      expect(response.headers.location).toBe('/orders/1');
      expect(response.headers['content-type']).toBeUndefined();
      expect(response.rawPayload).toEqual(Buffer.alloc(0));
    });

    it('throws before sending anything when a stored header cannot be written', async () => {
      const response = await replayApp({
        ...stored,
        headers: { ...stored.headers, 'x-note': 'bad\nvalue' },
      }).inject({ method: 'POST', url: '/' });

      expect(response.statusCode).toBe(500);
      expect(response.payload).toBe('replay failed; headers sent: false');
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(response.headers.location).toBeUndefined();
    });
  });
});
