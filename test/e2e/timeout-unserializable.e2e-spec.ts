/**
 * A global TimeoutInterceptor answers 408, then the slow handler returns a value `JSON.stringify`
 * refuses (a BigInt, a cycle). Nothing can be stored for it, and nothing may blow up: no
 * unhandled rejection (Node's default kills the process on one), the key is released as soon as
 * the handler settled (not held until `maxLockHoldSeconds`), so a retry runs, and an error says
 * why — on Express and Fastify.
 */
import type { LoggerService } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { runInThisContext } from 'node:vm';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { TimeoutInterceptor, postWithKey, recordOf } from '../fixtures/route-styles.controllers';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { UnserializableController } from '../fixtures/unserializable.controller';
import type { UnserializableBody } from '../fixtures/unserializable.controller';
import { waitFor } from '../fixtures/wait-for';

/** Keeps what the application logs at error level. */
class RecordingLogger implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

describe.each(ADAPTERS)(
  'a timed-out handler that returns what JSON cannot hold (%s)',
  (adapter) => {
    let db: TestDatabase;
    let t: TestApp;
    const logger = new RecordingLogger();
    // Jest gives each test file a copy of `process` whose events never fire: listen on the real
    // one, where Node reports unhandled rejections (and, with no listener, dies of them).
    const realProcess: NodeJS.Process = runInThisContext('process');
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    const gates: string[] = [];
    let n = 0;

    beforeAll(async () => {
      realProcess.on('unhandledRejection', listener);
      db = await createTestDatabase();
      t = await createTestApp(adapter, db, {
        controllers: [UnserializableController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
        logger,
      });
    });

    afterEach(() => {
      // A failed expectation must not leave a handler waiting for good.
      for (const gate of gates.splice(0)) t.probe.open(gate);
    });

    afterAll(async () => {
      await t?.close();
      await db?.drop();
      realProcess.off('unhandledRejection', listener);
    });

    it.each(['bigint', 'cycle'] as const)(
      '%s: no unhandled rejection, the key released once the handler settled, an error logged, the retry runs',
      async (kind) => {
        const key = `unserializable-${adapter}-${kind}-${++n}`;
        const body: UnserializableBody = { note: key, gate: key, kind };
        gates.push(key);
        unhandled.length = 0;
        logger.errors.length = 0;

        const first = await postWithKey(t.server, '/unserializable', key, body);
        expect(first.status).toBe(408);
        expect((await recordOf(db, key))?.status).toBe('in_flight');

        t.probe.open(key);
        await waitFor(async () => t.probe.ran(`settled:${key}`) === 1);
        // Let a rejection made while deciding on the handler's value reach the process.
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(unhandled).toEqual([]);

        // Released, nothing stored: not held by the heartbeat until maxLockHoldSeconds.
        await waitFor(async () => (await recordOf(db, key))?.status !== 'in_flight', 3000);
        expect(await recordOf(db, key)).toEqual({ status: 'released', response_status: null });
        expect(logger.errors).toEqual([expect.stringMatching(/cannot be serialized/)]);

        // The retry runs the handler again, and its plain JSON is stored and answered.
        const retry = await postWithKey(t.server, '/unserializable', key, body);
        expect(retry.status).toBe(201);
        expect(JSON.parse(retry.body.toString('utf8'))).toEqual({ id: 1, run: 2 });
        expect(t.probe.ran(`unserializable:${key}`)).toBe(2);
        expect(await recordOf(db, key)).toEqual({ status: 'completed', response_status: 201 });
      },
    );
  },
);
