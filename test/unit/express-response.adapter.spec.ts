/**
 * ExpressResponseAdapter on a bare Express 5 app, without Nest: every way a route writes its
 * response reaches the sink once (status, lower-case headers, exact bytes) before anything
 * leaves; the client gets what the sink decides; replays are exact and silence the route's later
 * writes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import type { Response } from 'express';
import request from 'supertest';
import { ExpressResponseAdapter } from '../../lib/http/express-response.adapter';
import type { StoredResponse } from '../../lib/interfaces/idempotency-record.interface';
import {
  PROBLEM_503,
  RecordingResponseSink,
  UNWRITABLE,
  deferred,
  isPending,
} from '../fixtures/recording-response-sink';

const adapter = new ExpressResponseAdapter();

/** An app whose one route captures its response into `sink`, then runs `route`. */
function appWith(sink: RecordingResponseSink, route: (res: Response) => void) {
  const app = express();
  app.disable('x-powered-by');
  app.post('/', (_req, res) => {
    adapter.capture(res, sink);
    route(res);
  });
  return app;
}

/** An app whose one route writes `stored` as a replay, then runs `after`. */
function replayApp(stored: StoredResponse, after: (res: Response) => void = () => {}) {
  const app = express();
  app.disable('x-powered-by');
  app.post('/', (_req, res) => {
    try {
      adapter.writeReplay(res, stored);
    } catch {
      res.status(500).send(`replay failed; headers sent: ${res.headersSent}`);
      return;
    }
    after(res);
  });
  return app;
}

/** POSTs to the app; the body comes back as the exact bytes received. */
function post(app: express.Express) {
  return request(app)
    .post('/')
    .buffer(true)
    .parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
}

const NOT_UTF8 = Buffer.from([0xff, 0x00, 0x80, 0xc3, 0x28]);

describe('ExpressResponseAdapter', () => {
  describe('capture', () => {
    it.each([
      {
        route: 'res.status(201).set(...).json(object)',
        write: (res: Response) => res.status(201).set('X-Trace', 'abc').json({ id: 1, n: 'café' }),
        status: 201,
        headers: { 'x-trace': 'abc', 'content-type': 'application/json; charset=utf-8' },
        body: Buffer.from('{"id":1,"n":"café"}'),
      },
      {
        route: 'res.send(string)',
        write: (res: Response) => res.send('<p>café</p>'),
        status: 200,
        headers: { 'content-type': 'text/html; charset=utf-8' },
        body: Buffer.from('<p>café</p>'),
      },
      {
        route: 'res.send(Buffer)',
        write: (res: Response) => res.send(NOT_UTF8),
        status: 200,
        headers: { 'content-type': 'application/octet-stream' },
        body: NOT_UTF8,
      },
      {
        route: 'res.redirect(303, url)',
        write: (res: Response) => res.redirect(303, '/x'),
        status: 303,
        headers: {
          location: '/x',
          vary: 'Accept',
          'content-type': 'text/plain; charset=utf-8',
          'content-length': '28',
        },
        body: Buffer.from('See Other. Redirecting to /x'),
      },
      {
        // Express 5 ignores the earlier status: redirect(url) always means 302.
        route: 'res.status(303).redirect(url)',
        write: (res: Response) => res.status(303).redirect('/x'),
        status: 302,
        headers: {
          location: '/x',
          vary: 'Accept',
          'content-type': 'text/plain; charset=utf-8',
          'content-length': '24',
        },
        body: Buffer.from('Found. Redirecting to /x'),
      },
      {
        route: 'res.end(string)',
        write: (res: Response) => res.status(202).end('raw'),
        status: 202,
        headers: {},
        body: Buffer.from('raw'),
      },
    ])(
      'hands $route to the sink once, then writes it',
      async ({ write, status, headers, body }) => {
        const sink = new RecordingResponseSink();
        const response = await post(appWith(sink, write));

        expect(sink.responses).toEqual([{ status, headers, body }]);
        expect(sink.ended).toBe(0);
        expect(response.status).toBe(status);
        expect(response.headers['content-type']).toBe(headers['content-type']);
        expect(response.body).toEqual(body);
      },
    );

    it('writes the original when the sink answers with the same object', async () => {
      const sink = new RecordingResponseSink(async (outgoing) => outgoing);
      const response = await post(appWith(sink, (res) => res.status(201).json({ id: 1 })));

      expect(response.status).toBe(201);
      expect(response.body).toEqual(Buffer.from('{"id":1}'));
    });

    it('writes nothing while the sink decides', async () => {
      const decision = deferred<undefined>();
      const sink = new RecordingResponseSink(() => decision.promise);
      let captured!: Response;
      const response = post(
        appWith(sink, (res) => {
          captured = res;
          res.status(201).json({ id: 1 });
        }),
      ).then((r) => r);

      await sink.firstResponse;
      expect(captured.headersSent).toBe(false);
      expect(await isPending(response)).toBe(true);

      decision.resolve(undefined);
      expect((await response).status).toBe(201);
    });

    it.each([
      ['res.json(object)', (res: Response) => res.status(201).json({ id: 1 }), {}],
      // Vary stays, as CORS's would: it says what the answer depends on, not what it is.
      ['res.redirect(303, url)', (res: Response) => res.redirect(303, '/x'), { vary: 'Accept' }],
      ['res.end(string)', (res: Response) => res.end('raw'), {}],
    ])(
      "writes a replacement decision instead of %s, without the route's headers",
      async (_, write, kept) => {
        const sink = new RecordingResponseSink(async () => PROBLEM_503);
        const response = await post(
          appWith(sink, (res) => {
            res.set({ Location: '/orders/1', ETag: '"v1"', 'X-Trace': 'abc' });
            res.cookie('session', 'abc');
            write(res);
          }),
        );

        expect(response.status).toBe(503);
        // Exactly the decision's headers, the route's own that describe no answer in
        // particular (X-Trace) and what Node adds to every response.
        const headers: Record<string, unknown> = { ...response.headers };
        for (const name of ['date', 'connection', 'keep-alive']) delete headers[name];
        expect(headers).toEqual({
          ...PROBLEM_503.headers,
          ...kept,
          'x-trace': 'abc',
          'content-length': String(PROBLEM_503.body.length),
        });
        expect(response.body).toEqual(PROBLEM_503.body);
      },
    );

    it('answers 500 and reports it when the decision cannot be written', async () => {
      const rejections: unknown[] = [];
      const onRejection = (reason: unknown) => rejections.push(reason);
      process.on('unhandledRejection', onRejection);
      try {
        const sink = new RecordingResponseSink(async () => UNWRITABLE);
        const response = await post(appWith(sink, (res) => res.status(201).json({ id: 1 })));

        expect(response.status).toBe(500);
        expect(response.headers['x-note']).toBeUndefined();
        expect(response.body).toEqual(Buffer.alloc(0));
        expect(sink.writeFailures).toEqual([expect.objectContaining({ code: 'ERR_INVALID_CHAR' })]);
      } finally {
        process.off('unhandledRejection', onRejection);
      }
      expect(rejections).toEqual([]);
    });

    it('reports a response written chunk by chunk only when it ended', async () => {
      const sink = new RecordingResponseSink();
      const closed = deferred();
      const response = await post(
        appWith(sink, (res) => {
          res.on('close', () => closed.resolve());
          res.write('a');
          res.end('b');
        }),
      );
      await closed.promise;

      expect(response.body).toEqual(Buffer.from('ab'));
      expect(sink.responses).toEqual([]);
      expect(sink.ended).toBe(1);
    });

    it('reports a file sent with res.sendFile only when it ended', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'express-adapter-'));
      try {
        const file = join(dir, 'receipt.txt');
        writeFileSync(file, 'receipt #1');
        const sink = new RecordingResponseSink();
        const closed = deferred();
        const response = await post(
          appWith(sink, (res) => {
            res.on('close', () => closed.resolve());
            res.sendFile(file);
          }),
        );
        await closed.promise;

        expect(response.headers['content-type']).toBe('text/plain; charset=utf-8');
        expect(response.body).toEqual(Buffer.from('receipt #1'));
        expect(sink.responses).toEqual([]);
        expect(sink.ended).toBe(1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('reports nothing when the client leaves before a response, and captures one that comes later', async () => {
      const sink = new RecordingResponseSink();
      const entered = deferred<Response>();
      const closed = deferred();
      const app = appWith(sink, (res) => {
        res.on('close', () => closed.resolve());
        entered.resolve(res);
      });
      const server = app.listen(0, '127.0.0.1');
      try {
        await new Promise((resolve) => server.once('listening', resolve));
        const { port } = server.address() as AddressInfo;
        const client = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/' });
        client.on('error', () => {});
        client.end();
        const res = await entered.promise;
        client.destroy();
        await closed.promise;

        expect(sink.responses).toEqual([]);
        expect(sink.ended).toBe(0);
        res.status(201).json({ id: 1 });
        expect(sink.responses).toHaveLength(1);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  describe('writeReplay', () => {
    const stored: StoredResponse = {
      status: 201,
      headers: { 'content-type': 'application/octet-stream', location: '/orders/1' },
      body: NOT_UTF8,
    };

    it('writes the status, the stored headers, Idempotent-Replayed and the exact bytes', async () => {
      const response = await post(replayApp(stored));

      expect(response.status).toBe(201);
      expect(response.headers).toMatchObject({
        'content-type': 'application/octet-stream',
        location: '/orders/1',
        'idempotent-replayed': 'true',
      });
      expect(response.body).toEqual(NOT_UTF8);
    });

    it("makes the route's later writes no-ops", async () => {
      const later: unknown[] = [];
      const response = await post(
        replayApp(stored, (res) => {
          // Without the replay's silencing, send and redirect throw ERR_HTTP_HEADERS_SENT.
          later.push(res.status(500).send('late') === res);
          later.push((res.redirect('/elsewhere') as unknown) === res);
          later.push(res.end('late') === res);
        }),
      );

      expect(later).toEqual([true, true, true]);
      expect(response.status).toBe(201);
      expect(response.headers.location).toBe('/orders/1');
      expect(response.body).toEqual(NOT_UTF8);
    });

    it('writes an empty 303 without a content type', async () => {
      const response = await post(
        replayApp({ status: 303, headers: { location: '/orders/1' }, body: Buffer.alloc(0) }),
      );

      expect(response.status).toBe(303);
      expect(response.headers.location).toBe('/orders/1');
      expect(response.headers['content-type']).toBeUndefined();
      expect(response.body).toEqual(Buffer.alloc(0));
    });

    it('throws before writing anything when a stored header cannot be written', async () => {
      const response = await post(
        replayApp({ ...stored, headers: { ...stored.headers, 'x-note': 'bad\nvalue' } }),
      );

      expect(response.status).toBe(500);
      expect(response.body.toString()).toBe('replay failed; headers sent: false');
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(response.headers.location).toBeUndefined();
    });
  });
});
