/**
 * Every request and response of an idempotent route shares one V8 map with the others, on
 * Express as on Fastify: Express 5 gives each its own (its `setPrototypeOf`), which every property
 * read on them pays for, and the guard gives them the shared one. Compared with V8's own
 * `%HaveSameMap` inside the handler, two requests at once.
 */
import { setFlagsFromString } from 'node:v8';
import { Controller, Post, Req, Res } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

setFlagsFromString('--allow-natives-syntax');
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (
  a: object,
  b: object,
) => boolean;

/** The handler's request and response, held until a second request is in the handler too. */
@Controller('shapes')
class ShapesController {
  static live: [object, object][] = [];
  static compared: Promise<boolean[]>;
  private static compare: (same: boolean[]) => void;

  static reset(): void {
    ShapesController.live = [];
    ShapesController.compared = new Promise((resolve) => (ShapesController.compare = resolve));
  }

  @Post()
  @Idempotent()
  async create(@Req() req: object, @Res({ passthrough: true }) res: object) {
    const live = ShapesController.live;
    if (live.push([req, res]) === 2) {
      ShapesController.compare([sameMap(live[0][0], live[1][0]), sameMap(live[0][1], live[1][1])]);
    }
    await ShapesController.compared;
    return { ok: true };
  }
}

describe.each(ADAPTERS)('the shapes of requests and responses (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: [ShapesController] });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('is one map for the requests and one for the responses, shared by all', async () => {
    ShapesController.reset();
    const send = (key: string) =>
      request(t.server).post('/shapes').set('Idempotency-Key', key).send({ amount: 1 });

    const answers = await Promise.all([send('shape-1'), send('shape-2')]);

    expect(answers.map((answer) => answer.status)).toEqual([201, 201]);
    expect(await ShapesController.compared).toEqual([true, true]);
  });
});
