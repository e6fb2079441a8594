/**
 * The handler's capture goes through the check every stored answer passes
 * (lib/execution/sendable-response.ts): a response Node.js cannot send (a CR/LF in a replayed
 * header, which Fastify's `reply.header()` takes and only `writeHead()` refuses) is never
 * stored, so a retry runs the handler again instead of getting 500 from a stored answer until
 * its TTL ends. Real PostgreSQL, both adapters.
 */
import { Body, Controller, Post, Res } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** Sets `Location` on its response; with a CR/LF in it when told. */
@Controller('unsendable')
class UnsendableController {
  runs = 0;

  @Post()
  @Idempotent()
  create(@Body() body: { broken?: boolean }, @Res({ passthrough: true }) response: any) {
    this.runs++;
    const location = body.broken ? '/a\r\nSet-Cookie: stolen=1' : '/orders/1';
    // Fastify's reply.header(), Express's res.setHeader() (which refuses the value at once).
    if (typeof response.header === 'function' && typeof response.code === 'function') {
      response.header('location', location);
    } else {
      response.setHeader('location', location);
    }
    return { run: this.runs };
  }
}

describe.each(ADAPTERS)('an answer Node.js cannot send is never stored (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: [UnsendableController] });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const post = (key: string, body: { broken?: boolean }) =>
    request(t.server).post('/unsendable').set('Idempotency-Key', key).send(body);
  const record = async (key: string) =>
    (
      await db.query(
        `SELECT status, response_status, response_headers FROM idempotency_records
          WHERE idempotency_key = $1`,
        [key],
      )
    )[0];

  it('a CR/LF in a replayed header: 5xx, the key released with nothing stored, a retry runs', async () => {
    const controller = t.app.get(UnsendableController);
    const before = controller.runs;
    const first = await post('broken-1', { broken: true });
    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(first.headers['set-cookie']).toBeUndefined();
    expect(await record('broken-1')).toEqual({
      status: 'released',
      response_status: null,
      response_headers: null,
    });
    const retry = await post('broken-1', { broken: true });
    expect(retry.status).toBeGreaterThanOrEqual(500);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(controller.runs - before).toBe(2);
  });
});
