import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LossyHttpProxy } from '../chaos/history/lossy-http-proxy';
import type { ProxiedAnswer, ProxyFault } from '../chaos/history/lossy-http-proxy';

/** An app that counts the requests it got and answers 201 with a JSON body. */
async function startApp(): Promise<{ url: string; received: string[]; server: Server }> {
  const received: string[] = [];
  const server = createServer((request, response) => {
    received.push(String(request.headers['idempotency-key']));
    request.resume();
    request.on('end', () =>
      response.writeHead(201, { 'content-type': 'application/json' }).end('{"paid":true}'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, server };
}

describe('the lossy HTTP proxy', () => {
  let app: Awaited<ReturnType<typeof startApp>>;
  beforeEach(async () => (app = await startApp()));
  afterEach(() => new Promise((resolve) => app.server.close(resolve)));

  async function through(
    fault: ProxyFault | undefined,
    target = () => app.url as string | undefined,
  ) {
    const faults: string[] = [];
    const duplicates: (ProxiedAnswer | undefined)[] = [];
    const proxy = await LossyHttpProxy.start({
      target,
      rate: 1,
      draw: () => fault,
      now: () => 0,
      onFault: (kind, key) => faults.push(`${kind} ${key}`),
      onDuplicateAnswer: (_key, _body, _at, answer) => duplicates.push(answer),
    });
    const started = Date.now();
    const result = await fetch(`${proxy.url}/payments`, {
      method: 'POST',
      headers: { 'idempotency-key': 'k1', 'content-type': 'application/json' },
      body: '{"amount":1}',
    }).then(
      async (response) => ({ status: response.status, body: await response.text() }),
      () => 'transport error',
    );
    await new Promise((resolve) => setTimeout(resolve, 100)); // the duplicate's answer
    await proxy.close();
    return { result, faults, duplicates, ms: Date.now() - started };
  }

  it('passes a request and its answer through when no fault is drawn', async () => {
    const { result, faults } = await through(undefined);
    expect(result).toEqual({ status: 201, body: '{"paid":true}' });
    expect(faults).toEqual([]);
    expect(app.received).toEqual(['k1']);
  });

  it('drops a request before the app sees it', async () => {
    const { result, faults } = await through('drop');
    expect(result).toBe('transport error');
    expect(faults).toEqual(['drop k1']);
    expect(app.received).toEqual([]);
  });

  it('delays a request, then passes it', async () => {
    const { result, ms } = await through('delay');
    expect(result).toEqual({ status: 201, body: '{"paid":true}' });
    expect(ms).toBeGreaterThanOrEqual(200);
  });

  it('sends a request twice and reports the copy’s answer, which no client saw', async () => {
    const { result, duplicates } = await through('duplicate');
    expect(result).toEqual({ status: 201, body: '{"paid":true}' });
    expect(app.received).toEqual(['k1', 'k1']);
    expect(duplicates.map((answer) => answer?.status)).toEqual([201]);
  });

  it('resets the connection after the app answered', async () => {
    const { result, faults } = await through('reset after answer');
    expect(result).toBe('transport error');
    expect(faults).toEqual(['reset after answer k1']);
    expect(app.received).toEqual(['k1']);
  });

  it('cuts the connection while its app is down', async () => {
    const { result } = await through(undefined, () => undefined);
    expect(result).toBe('transport error');
  });
});
