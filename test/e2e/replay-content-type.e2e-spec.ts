/**
 * A replay's headers are the first answer's: the exact `Content-Type` the adapter wrote (Express
 * puts `charset=utf-8` on every text body, Fastify only on JSON ones and leaves a `text/csv`
 * string alone) and the exact bytes, whether the replay comes from the instance that ran the
 * handler or from another instance on the same database (the record read from PostgreSQL).
 */
import { Controller, Header, Param, Post, Res } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { rawRequest } from '../fixtures/raw-http';
import type { RawResponse } from '../fixtures/raw-http';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { AdapterName, TestApp } from '../fixtures/test-app';

/** Handler runs by route, over every instance of a test file. */
const runs = new Map<string, number>();
const count = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);

const CSV = 'id,amount\n1,1999\n2,é\n';

/** Content types a route sets itself (`to/:name`), in the shapes users write them. */
const TYPES: Record<string, string> = {
  'csv-tight': 'text/csv;charset=UTF-8',
  'csv-latin1': 'text/csv; charset=iso-8859-1',
  'csv-upper': 'Text/CSV',
  'csv-params': 'text/csv; header=present',
  'api-json': 'application/vnd.api+json',
  'json-upper': 'Application/JSON',
};

/** Sets a header on either adapter's response. */
function setHeader(res: any, name: string, value: string): void {
  if (typeof res.code === 'function') res.header(name, value);
  else res.setHeader(name, value);
}

@Controller('typed')
class TypedController {
  @Post('csv')
  @Idempotent()
  @Header('Content-Type', 'text/csv')
  csv(): string {
    count('csv');
    return CSV;
  }

  @Post('plain')
  @Idempotent()
  plain(): string {
    count('plain');
    return 'just text';
  }

  @Post('pdf')
  @Idempotent()
  @Header('Content-Type', 'application/pdf')
  pdf(): Buffer {
    count('pdf');
    return Buffer.from([0x25, 0x50, 0x44, 0x46, 0x00, 0xff]);
  }

  @Post('sent')
  @Idempotent()
  sent(@Res() res: any): void {
    count('sent');
    setHeader(res, 'content-type', 'text/calendar');
    res.send('BEGIN:VCALENDAR');
  }

  @Post('to/:name')
  @Idempotent()
  typed(@Res({ passthrough: true }) res: any, @Param('name') name: string): string {
    count(`to/${name}`);
    setHeader(res, 'content-type', TYPES[name]);
    return name.includes('json') ? '{"a":1}' : CSV;
  }

  /** Raw Node code, no content type (stored on Express; Fastify stores no raw answer). */
  @Post('raw')
  @Idempotent()
  raw(@Res() res: any): void {
    count('raw');
    res.statusCode = 200;
    res.end('raw bytes');
  }
}

const ROUTES = ['csv', 'plain', 'pdf', 'sent', ...Object.keys(TYPES).map((name) => `to/${name}`)];

describe.each(ADAPTERS)('a replay has the first answer’s Content-Type (%s)', (adapter) => {
  let db: TestDatabase;
  let first: TestApp;
  let second: TestApp;
  let express: TestApp;
  let n = 0;

  const start = async (on: AdapterName) => {
    const app = await createTestApp(on, db, { controllers: [TypedController] });
    await app.app.listen(0, '127.0.0.1');
    return app;
  };
  const post = (t: TestApp, route: string, key: string): Promise<RawResponse> =>
    rawRequest((t.server.address() as AddressInfo).port, {
      path: `/typed/${route}`,
      headers: [
        ['Idempotency-Key', key],
        ['Content-Type', 'application/json'],
      ],
      body: '{}',
    });
  const expectSame = (replay: RawResponse, answer: RawResponse) => {
    expect(replay.status).toBe(answer.status);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['content-type']).toBe(answer.headers['content-type']);
    expect(replay.body.equals(answer.body)).toBe(true);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    first = await start(adapter);
    second = await start(adapter);
    express = await start('express');
  });

  afterAll(async () => {
    await first?.close();
    await second?.close();
    await express?.close();
    await db?.drop();
  });

  it.each(ROUTES)(
    '%s: replayed here and by another instance, same type and bytes',
    async (route) => {
      const key = `typed-${adapter}-${++n}`;
      const before = runs.get(route) ?? 0;
      const answer = await post(first, route, key);
      expect(answer.status).toBe(201);
      expect(answer.headers['idempotent-replayed']).toBeUndefined();
      expectSame(await post(second, route, key), answer);
      expectSame(await post(first, route, key), answer);
      expect((runs.get(route) ?? 0) - before).toBe(1);
    },
  );

  it('answers a text/csv string with the type the adapter writes, and replays it so', async () => {
    const key = `typed-${adapter}-${++n}`;
    const answer = await post(first, 'csv', key);
    const replay = await post(second, 'csv', key);
    const written = adapter === 'fastify' ? 'text/csv' : 'text/csv; charset=utf-8';
    expect(answer.headers['content-type']).toBe(written);
    expect(replay.headers['content-type']).toBe(written);
    expect(replay.body.toString('utf8')).toBe(CSV);
  });

  it('replays an answer stored without a content type without one', async () => {
    const key = `typed-${adapter}-${++n}`;
    const answer = await post(express, 'raw', key);
    expect(answer.headers['content-type']).toBeUndefined();
    expectSame(await post(first, 'raw', key), answer);
    expectSame(await post(second, 'raw', key), answer);
    expect(runs.get('raw')).toBe(adapter === 'express' ? 1 : 2);
  });
});
