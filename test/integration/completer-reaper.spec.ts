/**
 * The completer and the reaper of operations in phases (docs/design/contract.md#operations-in-phases) on real PostgreSQL, after
 * Rocket Rides' cases: the completer takes over only unfinished operations nobody runs (lease
 * lapsed or released) whose last run is old enough, drives them to `finished` with the same
 * derived keys, marks those older than `phases.maxAgeSeconds` abandoned without running them,
 * skips rows someone else holds, and races a client retry without running anything twice. The
 * purge deletes finished records past their TTL, never an unfinished one (it is marked
 * abandoned and kept until resolved or its retention passes). Time is moved by SQL.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import request from 'supertest';
import { IdempotencyCompleter, IdempotencyOperations } from '../../lib/phases';
import { IdempotencyPurgeService } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { OrdersController } from '../fixtures/orders.controller';
import { CreateTransfer, TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import type { TransferInput } from '../fixtures/phased-transfers';
import { createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const RECORDS = 'idempotency_records';
const JOBS = 'idempotency_records_jobs';
const MAX_AGE_SECONDS = 3_600;
const RETENTION_SECONDS = 7_200;

describe('completer and reaper of operations in phases', () => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  let completer: IdempotencyCompleter;
  let operations: IdempotencyOperations;
  let purge: IdempotencyPurgeService;
  let n = 0;
  const key = () => `cr-${++n}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp('express', db, {
      ...TRANSFERS,
      controllers: [...TRANSFERS.controllers, OrdersController],
      module: { purge: { enabled: false, abandonedRetentionSeconds: RETENTION_SECONDS } },
      phases: {
        completer: { enabled: false, afterSeconds: 60 },
        jobs: false,
        maxAgeSeconds: MAX_AGE_SECONDS,
      },
    });
    hooks = t.app.get(TransferHooks);
    completer = t.app.get(IdempotencyCompleter);
    operations = t.app.get(IdempotencyOperations);
    purge = t.app.get(IdempotencyPurgeService);
    await db.query("SET lock_timeout = '5s'");
  });

  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  beforeEach(async () => {
    await db.query(`TRUNCATE ${RECORDS}, ${JOBS}, ledger, notifications, orders`);
    hooks.before.clear();
    hooks.providerAnswers.length = 0;
    hooks.providerCalls.length = 0;
    hooks.sent.clear();
    hooks.afterSend = undefined;
    hooks.afterStage = undefined;
    hooks.onNotify = undefined;
    hooks.stepRuns.clear();
    t.events.length = 0;
  });

  const transfer = (k: string, body: TransferInput) =>
    request(t.server).post('/transfers').set('Idempotency-Key', k).send(body);
  // A distinct amount per key, so ledger rows can be told apart.
  const bodyOf = (k: string): TransferInput => ({
    amount: 1_000 + Number(k.slice(3)),
    to: `to-${k}`,
  });

  const record = async (k: string) =>
    (
      await db.query(
        `SELECT scope, status, recovery_point, operation, operation_input, operation_state,
                owner_token, attempts, locked_until > now() AS leased
           FROM ${RECORDS} WHERE idempotency_key = $1`,
        [k],
      )
    )[0];

  /** A transfer that failed after `reserved` (provider threw) or after `sent` (step 3 threw). */
  const unfinished = async (k: string, at: 'reserved' | 'sent', body = bodyOf(k)) => {
    if (at === 'reserved') hooks.providerAnswers.push('throw');
    else {
      hooks.before.set('settled', () => {
        throw new Error('settled step failed');
      });
    }
    const response = await transfer(k, body);
    hooks.before.delete('settled');
    expect(response.status).toBe(500);
    expect(await record(k)).toMatchObject({ status: 'released', recovery_point: at });
    return body;
  };

  /** Moves a record's clocks back by SQL: `{ last_run_at: '2 minutes' }` and so on. */
  const ago = (k: string, columns: Record<string, string>) =>
    db.query(
      `UPDATE ${RECORDS} SET ${Object.keys(columns)
        .map((column, i) => `${column} = now() - $${i + 2}::interval`)
        .join(', ')} WHERE idempotency_key = $1`,
      [k, ...Object.values(columns)],
    );

  const eventsOf = (type: string) => t.events.filter((e) => e.type === type) as any[];

  describe('completer', () => {
    it('leaves a fresh record, drives an old one to finished; a retry then replays it', async () => {
      const fresh = key();
      const old = key();
      await unfinished(fresh, 'reserved');
      const body = await unfinished(old, 'reserved');
      await ago(fresh, { last_run_at: '30 seconds' });
      await ago(old, { last_run_at: '2 minutes' });
      // The failed request's provider call, with the derived key the completer must reuse.
      const sendKey = hooks.providerCalls[1].key;
      const reservedRuns = hooks.stepRuns.get('reserved');

      expect(await completer.completeStale()).toEqual({ taken: 1, completed: 1, abandoned: 0 });
      expect(await record(fresh)).toMatchObject({ status: 'released', recovery_point: 'reserved' });
      const done = await record(old);
      expect(done).toMatchObject({ status: 'completed', recovery_point: 'finished', leased: null });
      expect(hooks.stepRuns.get('reserved')).toBe(reservedRuns);
      expect(eventsOf('operation_completed_by_completer')).toEqual([
        expect.objectContaining({ key: old, outcome: 'completed', operation: 'transfers.create' }),
      ]);

      const replay = await transfer(old, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      const { ledgerId, providerId } = done.operation_state;
      expect(replay.body).toEqual({ ledgerId, providerId, amount: body.amount });
      expect(replay.headers.location).toBe(`/transfers/${ledgerId}`);
      expect(
        await db.query('SELECT id, status, provider_id FROM ledger WHERE amount = $1', [
          body.amount,
        ]),
      ).toEqual([{ id: ledgerId, status: 'settled', provider_id: providerId }]);
      // The completer called the provider with the failed request's derived key; one send.
      expect(hooks.providerCalls.filter((c) => c.key === sendKey).map((c) => c.sent)).toEqual([
        false,
        true,
      ]);
      expect(hooks.providerCalls.filter((c) => c.sent)).toEqual([{ key: sendKey, sent: true }]);
      expect(await db.query(`SELECT name, origin_key FROM ${JOBS}`)).toEqual([
        { name: 'notify', origin_key: old },
      ]);
    });

    it('resumes a record released before its first step committed, with the stored input', async () => {
      const k = key();
      const body = bodyOf(k);
      hooks.before.set('reserved', () => {
        throw new Error('first step failed');
      });
      expect((await transfer(k, body)).status).toBe(500);
      hooks.before.delete('reserved');
      expect(await record(k)).toMatchObject({
        status: 'released',
        recovery_point: 'started',
        operation_input: body,
      });
      await ago(k, { last_run_at: '2 minutes' });
      expect(await completer.completeStale()).toEqual({ taken: 1, completed: 1, abandoned: 0 });
      const done = await record(k);
      expect(done).toMatchObject({ status: 'completed', operation_input: body });
      expect(await db.query('SELECT amount, status FROM ledger')).toEqual([
        { amount: body.amount, status: 'settled' },
      ]);
      const replay = await transfer(k, body);
      expect(replay.status).toBe(201);
      expect(replay.body).toMatchObject({ amount: body.amount });
    });

    it('releases what it could not complete and takes it again after afterSeconds', async () => {
      const k = key();
      const body = await unfinished(k, 'reserved');
      await ago(k, { last_run_at: '2 minutes' });
      hooks.providerAnswers.push('throw');
      expect(await completer.completeStale()).toEqual({ taken: 1, completed: 0, abandoned: 0 });
      expect(eventsOf('operation_completed_by_completer')).toEqual([
        expect.objectContaining({ key: k, outcome: 'failed' }),
      ]);
      expect(await record(k)).toMatchObject({ status: 'released', recovery_point: 'reserved' });
      // Its last run is now: not taken again before afterSeconds.
      expect(await completer.completeStale()).toEqual({ taken: 0, completed: 0, abandoned: 0 });
      await ago(k, { last_run_at: '61 seconds' });
      expect(await completer.completeStale()).toEqual({ taken: 1, completed: 1, abandoned: 0 });
      const replay = await transfer(k, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(new Set(hooks.providerCalls.map((c) => c.key)).size).toBe(1);
    });

    it('never takes a record in flight with a live lease, even with an old last run; takes it once the lease lapsed', async () => {
      const k = key();
      const body = await unfinished(k, 'sent');
      await db.query(
        `UPDATE ${RECORDS} SET status = 'in_flight', locked_until = now() + interval '1 minute',
                last_run_at = now() - interval '10 minutes' WHERE idempotency_key = $1`,
        [k],
      );
      const before = await record(k);
      expect(await completer.completeStale()).toEqual({ taken: 0, completed: 0, abandoned: 0 });
      expect(await record(k)).toEqual(before);
      expect(hooks.stepRuns.get('settled')).toBe(1);

      await ago(k, { locked_until: '1 second' });
      expect(await completer.completeStale()).toEqual({ taken: 1, completed: 1, abandoned: 0 });
      const after = await record(k);
      expect(after).toMatchObject({ status: 'completed', recovery_point: 'finished' });
      expect(after.owner_token).not.toBe(before.owner_token);
      expect(after.attempts).toBe(before.attempts + 1);
      expect(hooks.stepRuns.get('sent')).toBe(1);
      expect(hooks.stepRuns.get('settled')).toBe(2);
      const replay = await transfer(k, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
    });

    it('never takes a live request, however old its last run', async () => {
      const k = key();
      let entered!: () => void;
      const inStep = new Promise<void>((resolve) => (entered = resolve));
      let leave!: () => void;
      const gate = new Promise<void>((resolve) => (leave = resolve));
      hooks.before.set('sent', async () => {
        entered();
        await gate;
      });
      // The provider step of this app's operation gets more than its 0.3 s, so a slow machine
      // does not time it out (and release it) while the completer looks.
      const sent = t.app.get(CreateTransfer).steps[1] as { options: { timeoutSeconds: number } };
      sent.options.timeoutSeconds = 10;
      let summary;
      const pending = transfer(k, bodyOf(k)).then((r) => r);
      try {
        await inStep;
        await ago(k, { last_run_at: '10 minutes' });
        expect(await record(k)).toMatchObject({ status: 'in_flight', leased: true });
        summary = await completer.completeStale();
      } finally {
        leave();
        sent.options.timeoutSeconds = 0.3;
      }
      expect(summary).toEqual({ taken: 0, completed: 0, abandoned: 0 });
      const response = await pending;
      expect(response.status).toBe(201);
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(hooks.stepRuns.get('sent')).toBe(1);
    });

    it('takes over from a stale owner whose lease lapsed: the stale owner changes nothing', async () => {
      const k = key();
      const body = bodyOf(k);
      let entered!: () => void;
      const inStep = new Promise<void>((resolve) => (entered = resolve));
      let leave!: () => void;
      const gate = new Promise<void>((resolve) => (leave = resolve));
      let entries = 0;
      // Only the first run (the request) waits; the completer's run goes straight through.
      hooks.before.set('sent', async () => {
        if (entries++ > 0) return;
        entered();
        await gate;
      });
      const sent = t.app.get(CreateTransfer).steps[1] as { options: { timeoutSeconds: number } };
      sent.options.timeoutSeconds = 10;
      let summary;
      const pending = transfer(k, body).then((r) => r);
      try {
        await inStep;
        // The request's process stalls past its lease (as after a long GC pause).
        await ago(k, { locked_until: '1 second', last_run_at: '2 minutes' });
        summary = await completer.completeStale();
      } finally {
        leave();
        sent.options.timeoutSeconds = 0.3;
      }
      expect(summary).toEqual({ taken: 1, completed: 1, abandoned: 0 });
      const stale = await pending;
      expect(stale.status).toBe(409);
      expect(stale.body.code).toBe('idempotency_key_in_use');

      expect(hooks.stepRuns.get('reserved')).toBe(1);
      expect(hooks.stepRuns.get('sent')).toBe(2);
      expect(hooks.stepRuns.get('settled')).toBe(1);
      // Both provider calls used one derived key: the provider sent once.
      expect(new Set(hooks.providerCalls.map((c) => c.key)).size).toBe(1);
      expect(hooks.providerCalls.map((c) => c.sent)).toEqual([true, true]);
      expect(hooks.sent.size).toBe(1);
      const done = await record(k);
      expect(done).toMatchObject({ status: 'completed', recovery_point: 'finished' });
      expect(await db.query('SELECT status FROM ledger')).toEqual([{ status: 'settled' }]);
      expect(
        await db.query(`SELECT count(*)::int AS n FROM ${JOBS} WHERE origin_key = $1`, [k]),
      ).toEqual([{ n: 1 }]);
      const replay = await transfer(k, body);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.ledgerId).toBe(done.operation_state.ledgerId);
    });

    it('never takes finished or plain records, however old; an empty table takes nothing', async () => {
      expect(await completer.completeStale()).toEqual({ taken: 0, completed: 0, abandoned: 0 });

      const finished = key();
      expect((await transfer(finished, bodyOf(finished))).status).toBe(201);
      const plainDone = key();
      const plainReleased = key();
      const plainLapsed = key();
      const order = (k: string, path = '/orders') =>
        request(t.server).post(path).set('Idempotency-Key', k).send({ amount: 5 });
      expect((await order(plainDone)).status).toBe(201);
      expect((await order(plainReleased, '/orders/crash')).status).toBe(500);
      expect((await order(plainLapsed, '/orders/crash')).status).toBe(500);
      await db.query(
        `UPDATE ${RECORDS} SET status = 'in_flight', locked_until = now() - interval '1 second'
          WHERE idempotency_key = $1`,
        [plainLapsed],
      );
      await db.query(
        `UPDATE ${RECORDS} SET created_at = now() - interval '2 days',
                last_run_at = CASE WHEN last_run_at IS NULL THEN NULL ELSE now() - interval '2 days' END,
                updated_at = now() - interval '2 days'`,
      );
      const before = await db.query(
        `SELECT * FROM ${RECORDS} ORDER BY length(idempotency_key), idempotency_key`,
      );
      expect(before.map((r) => [r.idempotency_key, r.status, r.operation])).toEqual([
        [finished, 'completed', 'transfers.create'],
        [plainDone, 'completed', null],
        [plainReleased, 'released', null],
        [plainLapsed, 'in_flight', null],
      ]);

      expect(await completer.completeStale()).toEqual({ taken: 0, completed: 0, abandoned: 0 });
      expect(
        await db.query(
          `SELECT * FROM ${RECORDS} ORDER BY length(idempotency_key), idempotency_key`,
        ),
      ).toEqual(before);
      expect(eventsOf('operation_abandoned')).toEqual([]);
    });

    it('marks a record older than maxAgeSeconds abandoned and never runs it; an operator resolves it', async () => {
      const replayed = key();
      const deleted = key();
      const replayedBody = await unfinished(replayed, 'reserved');
      const deletedBody = await unfinished(deleted, 'sent');
      for (const k of [replayed, deleted]) {
        await ago(k, { created_at: '2 hours', last_run_at: '2 hours' });
      }
      const runs = new Map(hooks.stepRuns);
      const calls = hooks.providerCalls.length;

      expect(await completer.completeStale()).toEqual({ taken: 0, completed: 0, abandoned: 2 });
      expect(hooks.stepRuns).toEqual(runs);
      expect(hooks.providerCalls).toHaveLength(calls);
      const { scope } = await record(replayed);
      expect(eventsOf('operation_abandoned').sort((x, y) => (x.key < y.key ? -1 : 1))).toEqual([
        {
          type: 'operation_abandoned',
          scope,
          key: replayed,
          operation: 'transfers.create',
          recoveryPoint: 'reserved',
          reason: 'max_age',
        },
        {
          type: 'operation_abandoned',
          scope,
          key: deleted,
          operation: 'transfers.create',
          recoveryPoint: 'sent',
          reason: 'max_age',
        },
      ]);
      expect(await record(replayed)).toMatchObject({ status: 'abandoned', owner_token: null });
      // Not taken by a later run either.
      expect(await completer.completeStale()).toEqual({ taken: 0, completed: 0, abandoned: 0 });

      const retry = await transfer(replayed, replayedBody);
      expect(retry.status).toBe(409);
      expect(retry.body.code).toBe('idempotency_operation_abandoned');
      expect(hooks.stepRuns).toEqual(runs);

      const listed = await operations.listAbandoned();
      const ledgerOf = async (k: string) => (await record(k)).operation_state.ledgerId;
      expect(listed.sort((x, y) => (x.key < y.key ? -1 : 1))).toEqual([
        {
          scope,
          key: replayed,
          recordId: expect.any(String),
          operation: 'transfers.create',
          recoveryPoint: 'reserved',
          input: replayedBody,
          state: { ledgerId: await ledgerOf(replayed) },
          attempts: 1,
          createdAt: expect.any(Date),
          abandonedAt: expect.any(Date),
        },
        {
          scope,
          key: deleted,
          recordId: expect.any(String),
          operation: 'transfers.create',
          recoveryPoint: 'sent',
          input: deletedBody,
          state: { ledgerId: await ledgerOf(deleted), providerId: expect.any(String) },
          attempts: 1,
          createdAt: expect.any(Date),
          abandonedAt: expect.any(Date),
        },
      ]);

      const resolution = { status: 201, body: { resolvedBy: 'operator', ok: true } };
      expect(await operations.resolveAbandoned(scope, replayed, { response: resolution })).toBe(
        true,
      );
      expect(await operations.resolveAbandoned(scope, replayed, { response: resolution })).toBe(
        false,
      );
      const replay = await transfer(replayed, replayedBody);
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual({ resolvedBy: 'operator', ok: true });

      expect(await operations.resolveAbandoned(scope, deleted)).toBe(true);
      expect(await record(deleted)).toBeUndefined();
      const fresh = await transfer(deleted, deletedBody);
      expect(fresh.status).toBe(201);
      expect(fresh.headers['idempotent-replayed']).toBeUndefined();
      expect(await operations.listAbandoned()).toEqual([]);
    });

    it('marks abandoned an old record a client retries itself, without running it', async () => {
      const k = key();
      const body = await unfinished(k, 'reserved');
      await ago(k, { created_at: '2 hours', last_run_at: '2 hours' });
      const runs = new Map(hooks.stepRuns);
      const retry = await transfer(k, body);
      expect(retry.status).toBe(409);
      expect(retry.body.code).toBe('idempotency_operation_abandoned');
      expect(hooks.stepRuns).toEqual(runs);
      expect(await record(k)).toMatchObject({ status: 'abandoned' });
      expect(eventsOf('operation_abandoned')).toEqual([
        expect.objectContaining({ key: k, reason: 'max_age', recoveryPoint: 'reserved' }),
      ]);
    });

    it('skips a candidate another transaction holds, and takes it once released', async () => {
      const keys = [key(), key(), key()];
      for (const k of keys) {
        await unfinished(k, 'reserved');
        await ago(k, { last_run_at: '5 minutes' });
      }
      const holder = new Client({ connectionString: db.url });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT * FROM ${RECORDS} WHERE idempotency_key = $1 FOR UPDATE`, [
          keys[1],
        ]);
        expect(await completer.completeStale()).toEqual({ taken: 2, completed: 2, abandoned: 0 });
        expect((await record(keys[0])).status).toBe('completed');
        expect(await record(keys[1])).toMatchObject({
          status: 'released',
          recovery_point: 'reserved',
        });
        expect((await record(keys[2])).status).toBe('completed');
        await holder.query('COMMIT');
      } finally {
        await holder.end();
      }
      expect(await completer.completeStale()).toEqual({ taken: 1, completed: 1, abandoned: 0 });
      expect((await record(keys[1])).status).toBe('completed');
    });

    it('races client retries: each operation runs once, the loser gets 409 or the replay', async () => {
      const rounds = 3;
      const perRound = 5;
      for (let round = 0; round < rounds; round++) {
        const keys = Array.from({ length: perRound }, () => key());
        const bodies = new Map<string, TransferInput>();
        for (const [i, k] of keys.entries()) {
          bodies.set(k, await unfinished(k, i % 2 ? 'sent' : 'reserved'));
          await ago(k, { last_run_at: '2 minutes' });
        }
        hooks.stepRuns.clear();
        t.events.length = 0;
        // A provider that takes a moment, so the other side arrives while one runs.
        hooks.before.set('sent', () => sleep(20));

        // Round 0: all at once; then the clients get a head start, then random delays.
        const completerDelay = [0, 5, Math.random() * 20][round];
        const clientDelay = () => (round === 2 ? Math.random() * 60 : 0);
        const [summary, ...responses] = await Promise.all([
          sleep(completerDelay).then(() => completer.completeStale()),
          ...keys.map((k) => sleep(clientDelay()).then(() => transfer(k, bodies.get(k)!))),
        ]);
        hooks.before.delete('sent');

        const ranHere = responses.filter(
          (r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined,
        ).length;
        for (const r of responses) {
          expect([201, 409]).toContain(r.status);
          if (r.status === 409) expect(r.body.code).toBe('idempotency_key_in_use');
        }
        console.log(
          JSON.stringify({
            summary,
            statuses: responses.map((r) => [r.status, r.headers['idempotent-replayed'] ?? '-']),
          }),
        );
        expect(summary.taken + ranHere).toBe(perRound);
        expect(summary.completed).toBe(summary.taken);
        // Step 3 ran once per operation, whoever ran it.
        expect(hooks.stepRuns.get('settled')).toBe(perRound);
        for (const k of keys) {
          const done = await record(k);
          expect(done).toMatchObject({ status: 'completed', recovery_point: 'finished' });
          expect(
            await db.query(`SELECT count(*)::int AS n FROM ${JOBS} WHERE origin_key = $1`, [k]),
          ).toEqual([{ n: 1 }]);
          expect(
            await db.query('SELECT status FROM ledger WHERE id = $1', [
              done.operation_state.ledgerId,
            ]),
          ).toEqual([{ status: 'settled' }]);
          const replay = await transfer(k, bodies.get(k)!);
          expect(replay.status).toBe(201);
          expect(replay.headers['idempotent-replayed']).toBe('true');
        }
        expect(
          await db.query(
            `SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'settled')::int AS settled FROM ledger`,
          ),
        ).toEqual([{ n: (round + 1) * perRound, settled: (round + 1) * perRound }]);
        // One send per derived key, over every attempt.
        const sends = new Map<string, number>();
        for (const call of hooks.providerCalls.filter((c) => c.sent)) {
          sends.set(call.key, (sends.get(call.key) ?? 0) + 1);
        }
        expect([...sends.values()].every((count) => count === 1)).toBe(true);
        expect(sends.size).toBe((round + 1) * perRound);
      }
    });
  });

  describe('reaper (purgeExpired)', () => {
    it('deletes finished records past their TTL, marks unfinished ones abandoned and keeps them', async () => {
      const finished = key();
      const unfinishedKey = key();
      const live = key();
      const oldAbandoned = key();
      const youngAbandoned = key();
      const notExpired = key();
      expect((await transfer(finished, bodyOf(finished))).status).toBe(201);
      expect((await transfer(notExpired, bodyOf(notExpired))).status).toBe(201);
      const body = await unfinished(unfinishedKey, 'reserved');
      await unfinished(live, 'sent');
      await unfinished(oldAbandoned, 'reserved');
      await unfinished(youngAbandoned, 'sent');
      await db.query(
        `UPDATE ${RECORDS} SET status = 'in_flight', locked_until = now() + interval '1 minute'
          WHERE idempotency_key = $1`,
        [live],
      );
      await db.query(
        `UPDATE ${RECORDS} SET status = 'abandoned', owner_token = NULL, locked_until = NULL
          WHERE idempotency_key = ANY($1)`,
        [[oldAbandoned, youngAbandoned]],
      );
      for (const k of [finished, unfinishedKey, live, oldAbandoned, youngAbandoned]) {
        await ago(k, { expires_at: '1 second', purge_after: '1 second' });
      }
      await ago(oldAbandoned, { updated_at: `${RETENTION_SECONDS + 60} seconds` });
      await ago(youngAbandoned, { updated_at: `${RETENTION_SECONDS - 600} seconds` });

      expect(await purge.purgeExpired()).toBe(2); // finished + oldAbandoned
      const left = await db.query(
        `SELECT idempotency_key, status FROM ${RECORDS} ORDER BY idempotency_key`,
      );
      expect(left).toEqual(
        [
          { idempotency_key: unfinishedKey, status: 'abandoned' },
          { idempotency_key: live, status: 'in_flight' },
          { idempotency_key: youngAbandoned, status: 'abandoned' },
          { idempotency_key: notExpired, status: 'completed' },
        ].sort((x, y) => (x.idempotency_key < y.idempotency_key ? -1 : 1)),
      );
      const { scope } = await record(unfinishedKey);
      expect(eventsOf('operation_abandoned')).toEqual([
        {
          type: 'operation_abandoned',
          scope,
          key: unfinishedKey,
          operation: 'transfers.create',
          recoveryPoint: 'reserved',
          reason: 'expired',
        },
      ]);
      expect(eventsOf('purged')).toEqual([expect.objectContaining({ count: 2 })]);

      // Kept for an operator: listed, answered 409, not deleted by the next purge.
      expect((await operations.listAbandoned()).map((a) => a.key).sort()).toEqual(
        [unfinishedKey, youngAbandoned].sort(),
      );
      const retry = await transfer(unfinishedKey, body);
      expect(retry.status).toBe(409);
      expect(retry.body.code).toBe('idempotency_operation_abandoned');
      expect(await purge.purgeExpired()).toBe(0);
      expect(await record(unfinishedKey)).toMatchObject({ status: 'abandoned' });

      // Once its retention passed, it goes too.
      await ago(unfinishedKey, { updated_at: `${RETENTION_SECONDS + 1} seconds` });
      expect(await purge.purgeExpired()).toBe(1);
      expect(await record(unfinishedKey)).toBeUndefined();
    });

    it('keeps its old behaviour for plain records: expired completed and released go, a live lease stays', async () => {
      const done = key();
      const released = key();
      const running = key();
      const fresh = key();
      const order = (k: string, path: string, extra: object = {}) =>
        request(t.server)
          .post(path)
          .set('Idempotency-Key', k)
          .send({ amount: 7, ...extra });
      expect((await order(done, '/orders')).status).toBe(201);
      expect((await order(released, '/orders/crash')).status).toBe(500);
      expect((await order(fresh, '/orders')).status).toBe(201);
      const pending = order(running, '/orders', { gate: running }).then((r) => r);
      await waitFor(async () => (await record(running))?.status === 'in_flight');
      for (const k of [done, released, running])
        await ago(k, { expires_at: '1 second', purge_after: '1 second' });

      expect(await purge.purgeExpired()).toBe(2);
      expect(
        (await db.query(`SELECT idempotency_key, status FROM ${RECORDS}`)).sort((x, y) =>
          x.idempotency_key < y.idempotency_key ? -1 : 1,
        ),
      ).toEqual(
        [
          { idempotency_key: running, status: 'in_flight' },
          { idempotency_key: fresh, status: 'completed' },
        ].sort((x, y) => (x.idempotency_key < y.idempotency_key ? -1 : 1)),
      );
      expect(eventsOf('operation_abandoned')).toEqual([]);

      t.probe.open(`${running}#1`);
      expect((await pending).status).toBe(201);
    });
  });
});
