/**
 * `@Idempotent()` must protect every route its class serves, wherever the handler is declared
 * (docs/design/contract.md#public-surface, docs/design/contract.md#the-decision-table, docs/design/contract.md#what-is-stored, docs/design/contract.md#transactional-completion): a handler inherited from an undecorated base class, routes a subclass
 * adds under a decorated base class, and a handler added by a mixin.
 */
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { orderCount } from '../fixtures/record-queries';
import {
  INHERITANCE_CONTROLLERS,
  derivedKeysByNote,
  expectReusedKeyRefused,
  postWithKey,
  recordOf,
} from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

const SHAPES = [
  ['(a) handler from an undecorated base class, @Idempotent() on the subclass', 'inherited'],
  ['(b) @Idempotent() on the base class, handler on the subclass', 'subclassed'],
  ['(c) handler from a mixin, @Idempotent() on the class', 'mixed'],
] as const;

describe.each(ADAPTERS)('@Idempotent() on inherited and mixed-in handlers (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let n = 0;
  const newKey = () => `inherit-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp(adapter, db, { controllers: INHERITANCE_CONTROLLERS });
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  describe.each(SHAPES)('%s', (_shape, route) => {
    it.each([
      [`/${route}`, route],
      [`/${route}-tx`, `${route}-tx`],
    ])('%s: runs once, stores the 201 and replays it byte for byte', async (path, counter) => {
      const key = newKey();
      const body = { amount: 3, note: key };

      const first = await postWithKey(t.server, path, key, body);
      // Status and body together, so a failure shows why.
      expect(`${first.status} ${first.body}`).toMatch(/^201 /);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      // Each class keeps its own options, also when two classes inherit the same handler
      // function (shape a: /inherited and /inherited-tx share UndecoratedCreateBase#create).
      expect(JSON.parse(first.body.toString('utf8')).inTransaction).toBe(path.endsWith('-tx'));

      const retry = await postWithKey(t.server, path, key, body);
      expect({
        status: retry.status,
        replayed: retry.headers['idempotent-replayed'],
        handlerRuns: t.probe.ran(`${counter}:${key}`),
      }).toEqual({ status: 201, replayed: 'true', handlerRuns: 1 });
      expect(retry.headers['content-type']).toBe(first.headers['content-type']);
      expect(retry.body.equals(first.body)).toBe(true);
      expect(await recordOf(db, key)).toEqual({ status: 'completed', response_status: 201 });
      // On the -tx route the row was written in the record's transaction: committed, once.
      expect(await orderCount(db, key)).toBe(1);
    });

    it.each([
      [`/${route}`, route],
      [`/${route}-tx`, `${route}-tx`],
    ])('%s: a key reused with another request is refused with 422', async (path, counter) => {
      const key = newKey();
      await postWithKey(t.server, path, key, { amount: 3, note: key });
      await expectReusedKeyRefused(t.server, t.probe, path, counter, key);
    });

    it(`/${route}-tx: a 5xx rolls back and releases; the retry runs with the same derived key`, async () => {
      const key = newKey();
      const body = { amount: 4, note: key, failFirst: true };
      const counter = `${route}-tx:${key}`;

      const failed = await postWithKey(t.server, `/${route}-tx`, key, body);
      // Status and body together, so a failure shows why.
      expect(`${failed.status} ${failed.body}`).toMatch(/^503 /);
      expect(await orderCount(db, key)).toBe(0);
      expect((await recordOf(db, key))?.status).toBe('released');

      const second = await postWithKey(t.server, `/${route}-tx`, key, body);
      expect(second.status).toBe(201);
      expect(t.probe.ran(counter)).toBe(2);
      const [charge1, charge2] = derivedKeysByNote.get(key) ?? [];
      expect(charge1).toMatch(/^[0-9a-f]{64}$/);
      expect(charge2).toBe(charge1);
      // The second run's write is committed with its completion.
      expect(await orderCount(db, key)).toBe(1);

      const replay = await postWithKey(t.server, `/${route}-tx`, key, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(second.body)).toBe(true);
      expect(t.probe.ran(counter)).toBe(2);
      expect(await orderCount(db, key)).toBe(1);
    });

    it(`/${route}: a body the ValidationPipe rejects gets 400 and does not burn the key`, async () => {
      const key = newKey();
      const counter = `${route}:${key}`;

      const invalid = await postWithKey(t.server, `/${route}`, key, { amount: -5, note: key });
      expect(invalid.status).toBe(400);
      expect(t.probe.ran(counter)).toBe(0);

      const corrected = await postWithKey(t.server, `/${route}`, key, { amount: 5, note: key });
      expect(corrected.status).toBe(201);
      expect(t.probe.ran(counter)).toBe(1);

      const retry = await postWithKey(t.server, `/${route}`, key, { amount: 5, note: key });
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.body.equals(corrected.body)).toBe(true);
      expect(t.probe.ran(counter)).toBe(1);
      expect(await orderCount(db, key)).toBe(1);
    });
  });
});
