/**
 * Operations in phases (docs/design/contract.md#operations-in-phases) when things go wrong, through HTTP on both adapters: a final
 * 4xx from a step, a step that throws after an earlier one committed, a step whose own
 * connection is killed, a provider call that runs past its timeout after it charged, a storm of
 * retries at each recovery point, stale owners (stalled between steps, or inside a foreign call
 * while another owner takes the key), a transactional route that cannot run an operation, and a
 * reused key. Observed as a user would: statuses, headers, bodies, rows, step runs, sends.
 */
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Body, Controller, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from '../../lib';
import { IdempotencyOperations } from '../../lib/phases';
import { OperationRunner } from '../../lib/phases/operation-runner';
import type { IdempotencyModuleOptions } from '../../lib';
import type { IdempotencyPhasesModuleOptions } from '../../lib/phases';
import { typeOrmStore } from '../../lib/storage/typeorm';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { CreateTransfer, TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import type { TransferInput } from '../fixtures/phased-transfers';
import { leaseLapsed } from '../fixtures/record-queries';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

/** `POST /transfers-tx`: an operation in phases on a transactional route (a misconfiguration). */
@Controller('transfers-tx')
class TransactionalTransfersController {
  constructor(private readonly operations: IdempotencyOperations) {}

  @Post()
  @Idempotent({ execution: { transactional: true } })
  create(@Body() body: TransferInput): Promise<unknown> {
    return this.operations.run(CreateTransfer, body);
  }
}

interface RecordRow {
  status: string;
  recovery_point: string | null;
  owner_token: string | null;
  record_id: string;
  attempts: number;
  response_status: number | null;
  response_body: Buffer | null;
}

/** The provider's derived key of a record (docs/design/contract.md#transactional-completion: sha256(recordId + '\0' + label)). */
const sendKeyOf = (recordId: string) =>
  createHash('sha256').update(`${recordId}\u0000send`).digest('hex');

/** A promise and the function that resolves it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/** Resolves when `signal` aborts. */
const abortOf = (signal: AbortSignal) =>
  new Promise<void>((resolve) =>
    signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true }),
  );

async function listen(t: TestApp): Promise<string> {
  await t.app.listen(0, '127.0.0.1');
  return `http://127.0.0.1:${(t.server.address() as AddressInfo).port}`;
}

describe.each(ADAPTERS)('operations in phases that fail on %s', (adapter) => {
  let db: TestDatabase;
  let seq = 0;
  const newKey = () => `phase-fail-${adapter}-${++seq}-${Date.now()}`;
  /** Ledger rows are told apart by their amount: one per test. */
  let amountSeq = 100;
  const newAmount = () => ++amountSeq;

  const record = async (k: string): Promise<RecordRow> =>
    (
      await db.query(
        `SELECT status, recovery_point, owner_token, record_id, attempts, response_status,
                response_body
           FROM idempotency_records WHERE idempotency_key = $1`,
        [k],
      )
    )[0];
  const ledger = (amount: number) =>
    db.query<{ id: number; status: string; provider_id: string | null }>(
      'SELECT id, status, provider_id FROM ledger WHERE amount = $1 ORDER BY id',
      [amount],
    );

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** One app on the shared database, listening, with its hooks reset before each test. */
  function useApp(module: IdempotencyModuleOptions, phases: IdempotencyPhasesModuleOptions = {}) {
    const ctx = {} as { t: TestApp; url: string; hooks: TransferHooks };
    beforeAll(async () => {
      ctx.t = await createTestApp(adapter, db, {
        ...TRANSFERS,
        controllers: [...TRANSFERS.controllers, TransactionalTransfersController],
        module,
        phases: { completer: false, jobs: false, ...phases },
      });
      ctx.url = await listen(ctx.t);
      ctx.hooks = ctx.t.app.get(TransferHooks);
    });
    afterAll(async () => {
      await ctx.t?.close();
    });
    beforeEach(() => {
      ctx.hooks.before.clear();
      ctx.hooks.providerAnswers.length = 0;
      ctx.hooks.afterSend = undefined;
    });
    const post = (path: string, k: string, body: TransferInput) =>
      request(ctx.url)
        .post(path)
        .set('Idempotency-Key', k)
        .send(body)
        .then((r) => r);
    return Object.assign(ctx, { post });
  }

  describe('with the default lease', () => {
    const app = useApp({});

    /** Makes the next run of `step` throw before it does anything. */
    const failOnce = (step: string) =>
      app.hooks.before.set(step, () => {
        app.hooks.before.delete(step);
        throw new Error(`${step} failed once`);
      });

    it('stores a decline (402) and replays it byte for byte; the provider was called once', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'decline' };
      const first = await app.post('/transfers', k, body);
      expect(first.status).toBe(402);
      expect(first.body).toEqual({ error: { code: 'declined' } });
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const stored = await record(k);
      expect(stored).toMatchObject({
        status: 'completed',
        recovery_point: 'finished',
        response_status: 402,
      });
      expect(stored.response_body!.toString()).toBe(first.text);

      const replay = await app.post('/transfers', k, body);
      expect(replay.status).toBe(402);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.headers['content-type']).toBe(first.headers['content-type']);
      expect(replay.text).toBe(first.text);
      expect(app.hooks.callsWith(sendKeyOf(stored.record_id))).toEqual([
        { key: sendKeyOf(stored.record_id), sent: false },
      ]);
      expect(app.hooks.ran(k, 'reserved')).toBe(1);
      expect(app.hooks.ran(k, 'sent')).toBe(1);
      expect(app.hooks.ran(k, 'settled')).toBe(0);
      expect(await ledger(body.amount)).toEqual([
        { id: expect.any(Number), status: 'pending', provider_id: null },
      ]);
    });

    it('answers 500 to an error thrown after a step committed, and the retry resumes after that step', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      app.hooks.providerAnswers.push('throw');
      const first = await app.post('/transfers', k, body);
      expect(first.status).toBe(500);
      expect(await record(k)).toMatchObject({ status: 'released', recovery_point: 'reserved' });
      expect(await ledger(body.amount)).toEqual([
        { id: expect.any(Number), status: 'pending', provider_id: null },
      ]);

      const retry = await app.post('/transfers', k, body);
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBeUndefined();
      expect(app.hooks.ran(k, 'reserved')).toBe(1);
      expect(app.hooks.ran(k, 'sent')).toBe(2);
      expect(app.hooks.ran(k, 'settled')).toBe(1);
      const rows = await ledger(body.amount);
      expect(rows).toEqual([
        { id: retry.body.ledgerId, status: 'settled', provider_id: retry.body.providerId },
      ]);
      const { record_id } = await record(k);
      expect(app.hooks.callsWith(sendKeyOf(record_id))).toEqual([
        { key: sendKeyOf(record_id), sent: false },
        { key: sendKeyOf(record_id), sent: true },
      ]);
    });

    it.each(['reserved', 'settled'])(
      'answers 503 when the connection of step "%s" is killed, commits nothing of it, and the retry finishes once',
      async (step) => {
        const k = newKey();
        const body = { amount: newAmount(), to: 'bob' };
        let killed: number | undefined;
        app.hooks.before.set(step, async (ctx) => {
          app.hooks.before.delete(step);
          const [{ pid }] = await ctx.manager.query('SELECT pg_backend_pid() AS pid');
          await db.query('SELECT pg_terminate_backend($1)', [pid]);
          await waitFor(
            async () =>
              (await db.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length === 0,
          );
          killed = pid;
        });
        const first = await app.post('/transfers', k, body);
        expect(killed).toBeDefined();
        // Fails closed like a claim without its store: 503, a stable code, Retry-After.
        expect(first.status).toBe(503);
        expect(first.body.code).toBe('idempotency_store_unavailable');
        expect(first.headers['retry-after']).toBeDefined();
        const afterFailure = await record(k);
        expect(afterFailure.status).toBe('released');
        if (step === 'reserved') {
          expect(afterFailure.recovery_point).toBe('started');
          expect(await ledger(body.amount)).toEqual([]);
        } else {
          expect(afterFailure.recovery_point).toBe('sent');
          expect(await ledger(body.amount)).toEqual([
            { id: expect.any(Number), status: 'pending', provider_id: null },
          ]);
          expect(
            await db.query('SELECT 1 FROM idempotency_records_jobs WHERE origin_key = $1', [k]),
          ).toEqual([]);
        }

        const retry = await app.post('/transfers', k, body);
        expect(retry.status).toBe(201);
        expect(await ledger(body.amount)).toEqual([
          { id: retry.body.ledgerId, status: 'settled', provider_id: retry.body.providerId },
        ]);
        const { record_id } = await record(k);
        expect(app.hooks.callsWith(sendKeyOf(record_id))).toEqual([
          { key: sendKeyOf(record_id), sent: true },
        ]);
        expect(app.hooks.ran(k, step)).toBe(2);
        expect(
          await db.query('SELECT 1 FROM idempotency_records_jobs WHERE origin_key = $1', [k]),
        ).toHaveLength(1);
      },
    );

    it('answers 503 when the provider charged but answered after the step timeout; the retry gets the same transfer', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      let reason: unknown;
      app.hooks.afterSend = async (ctx) => {
        app.hooks.afterSend = undefined;
        await abortOf(ctx.signal);
        reason = ctx.signal.reason;
      };
      const first = await app.post('/transfers', k, body);
      expect(first.status).toBe(503);
      expect(first.headers['retry-after']).toBe('1');
      expect(first.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(first.body.code).toBe('idempotency_retry_later');
      expect((reason as Error)?.name).toBe('TimeoutError');
      expect(await record(k)).toMatchObject({ status: 'released', recovery_point: 'reserved' });

      const retry = await app.post('/transfers', k, body);
      expect(retry.status).toBe(201);
      const sendKey = sendKeyOf((await record(k)).record_id);
      expect(retry.body.providerId).toBe(app.hooks.sent.get(sendKey));
      expect([...app.hooks.sent.keys()].filter((key) => key === sendKey)).toHaveLength(1);
      expect(app.hooks.callsWith(sendKey)).toEqual([
        { key: sendKey, sent: true },
        { key: sendKey, sent: true },
      ]);
      expect(await ledger(body.amount)).toEqual([
        { id: retry.body.ledgerId, status: 'settled', provider_id: retry.body.providerId },
      ]);
    });

    const storms = (['/transfers', '/transfers/serializable'] as const).flatMap((path) =>
      (['started', 'reserved', 'sent'] as const).map((point) => [path, point] as const),
    );
    /** The step after each recovery point, made to fail once to release the key there. */
    const failAfter = { started: 'reserved', reserved: 'sent', sent: 'settled' } as const;
    const steps = ['reserved', 'sent', 'settled'] as const;

    it.each(storms)(
      'on %s, 20 parallel retries of a key released at "%s" finish it once',
      async (path, point) => {
        const k = newKey();
        const body = { amount: newAmount(), to: 'bob' };
        const failing = failAfter[point];
        if (failing === 'sent') app.hooks.providerAnswers.push('throw');
        else failOnce(failing);
        expect((await app.post(path, k, body)).status).toBe(500);
        expect(await record(k)).toMatchObject({ status: 'released', recovery_point: point });

        const answers = await Promise.all(
          Array.from({ length: 20 }, () => app.post(path, k, body)),
        );
        const created = answers.filter((a) => a.status === 201);
        const inUse = answers.filter((a) => a.status === 409);
        expect(created.length + inUse.length).toBe(20);
        expect(created.length).toBeGreaterThanOrEqual(1);
        expect(new Set(created.map((a) => a.text)).size).toBe(1);
        for (const answer of inUse) {
          expect(answer.body.code).toBe('idempotency_key_in_use');
          expect(answer.headers['retry-after']).toBe('1');
        }

        const last = await app.post(path, k, body);
        expect(last.status).toBe(201);
        expect(last.headers['idempotent-replayed']).toBe('true');
        expect(last.text).toBe(created[0].text);
        expect(await ledger(body.amount)).toEqual([
          { id: last.body.ledgerId, status: 'settled', provider_id: last.body.providerId },
        ]);
        const sendKey = sendKeyOf((await record(k)).record_id);
        expect(app.hooks.callsWith(sendKey).filter((call) => call.sent)).toHaveLength(1);
        // Steps before the recovery point ran once, the failing one twice, later ones once.
        expect(steps.map((step) => app.hooks.ran(k, step))).toEqual(
          steps.map((step) => (step === failing ? 2 : 1)),
        );
      },
    );

    it('answers 500 problem+json on a transactional route and releases the key', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      const first = await app.post('/transfers-tx', k, body);
      expect(first.status).toBe(500);
      expect(first.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(first.body).toMatchObject({ status: 500, code: 'idempotency_operation_unavailable' });
      expect(await record(k)).toMatchObject({ status: 'released', recovery_point: null });

      const retry = await app.post('/transfers-tx', k, body);
      expect(retry.status).toBe(500);
      expect(retry.body.code).toBe('idempotency_operation_unavailable');
      expect(app.hooks.ran(k, 'reserved')).toBe(0);
      expect(await ledger(body.amount)).toEqual([]);
    });

    it('answers 422 to another payload under a key released at a recovery point', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      app.hooks.providerAnswers.push('unavailable');
      expect((await app.post('/transfers', k, body)).status).toBe(503);
      const released = await record(k);
      expect(released).toMatchObject({ status: 'released', recovery_point: 'reserved' });

      const reused = await app.post('/transfers', k, { ...body, amount: body.amount + 1 });
      expect(reused.status).toBe(422);
      expect(reused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(reused.body.code).toBe('idempotency_key_reused');
      expect(await record(k)).toEqual(released);

      const retry = await app.post('/transfers', k, body);
      expect(retry.status).toBe(201);
      expect(retry.body.amount).toBe(body.amount);
      expect(app.hooks.ran(k, 'reserved')).toBe(1);
    });
  });

  describe('with a 1 s lease that stops being renewed after 0.2 s', () => {
    // A claim that waits on a row lock gives up after 2 s, not 5 (see the second test).
    const app = useApp(
      {
        execution: { lockTimeoutSeconds: 1, maxLockHoldSeconds: 0.2 },
        store: typeOrmStore({ timeoutSeconds: 2 }),
      },
      { foreignStepMarginSeconds: 0.1 },
    );

    /** Runs A until it is held (by `hold`), lets its lease lapse, and has B take over. */
    async function takeOver(k: string, body: TransferInput, held: Promise<void>) {
      const a = app.post('/transfers', k, body);
      await held;
      await waitFor(() => leaseLapsed(db, k), 3000);
      const b = await app.post('/transfers', k, body);
      return { a, b };
    }

    it('a stale owner stalled before its next step changes nothing and gets 409', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      const phases = app.t.app.get(OperationRunner).operations!;
      const original = phases.beginStep.bind(phases);
      const reached = gate();
      const release = gate();
      let stalled = false;
      const spy = jest.spyOn(phases, 'beginStep').mockImplementation(async (ref, point, iso) => {
        if (ref.key === k && point === 'sent' && !stalled) {
          stalled = true;
          reached.open();
          await release.opened;
        }
        return original(ref, point, iso);
      });
      try {
        const { a, b } = await takeOver(k, body, reached.opened);
        expect(b.status).toBe(201);
        const finished = await record(k);
        expect(finished).toMatchObject({ status: 'completed', recovery_point: 'finished' });
        release.open();
        const stale = await a;
        expect(stale.status).toBe(409);
        expect(stale.body.code).toBe('idempotency_key_in_use');
        expect(await ledger(body.amount)).toEqual([
          { id: b.body.ledgerId, status: 'settled', provider_id: b.body.providerId },
        ]);
        expect(await record(k)).toEqual(finished);
        expect(finished.response_body!.toString()).toBe(b.text);
        expect(app.hooks.ran(k, 'settled')).toBe(1);
      } finally {
        release.open();
        spy.mockRestore();
      }
    });

    // The stale owner holds the row lock of its step's transaction while it stalls: a takeover
    // must not wait on it (nor fail 503), and the stale step's writes must not commit.
    it('a stale owner stalled inside its local step lets another take the key over and changes nothing', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      const reached = gate();
      const release = gate();
      app.hooks.before.set('settled', async (ctx) => {
        if (ctx.identity.attempt !== 1) return;
        reached.open();
        await release.opened;
      });
      try {
        const { a, b } = await takeOver(k, body, reached.opened);
        expect({ status: b.status, code: b.body.code }).toEqual({ status: 201, code: undefined });
        const finished = await record(k);
        expect(finished).toMatchObject({ status: 'completed', recovery_point: 'finished' });
        release.open();
        const stale = await a;
        expect(stale.status).toBe(409);
        expect(stale.body.code).toBe('idempotency_key_in_use');
        expect(await ledger(body.amount)).toEqual([
          { id: b.body.ledgerId, status: 'settled', provider_id: b.body.providerId },
        ]);
        expect(await record(k)).toEqual(finished);
        expect(finished.response_body!.toString()).toBe(b.text);
      } finally {
        release.open();
      }
    });
  });

  describe('with a 1 s lease that stops being renewed after 0.2 s, and a step in a long statement', () => {
    const app = useApp(
      { execution: { lockTimeoutSeconds: 1, maxLockHoldSeconds: 0.2 } },
      { foreignStepMarginSeconds: 0.1 },
    );
    const sleeping = () =>
      db.query(
        `SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND query = 'SELECT pg_sleep(8)'`,
      );

    // PostgreSQL does not notice a closed socket while a statement runs: unless the cut step's
    // backend is ended, its row lock stays until pg_sleep returns and the retry waits for it.
    it('a local step cut inside a long statement leaves no lock behind: the retry takes the key over at once', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      const reached = gate();
      app.hooks.before.set('settled', async (ctx) => {
        if (ctx.identity.attempt !== 1) return;
        reached.open();
        await ctx.manager.query('SELECT pg_sleep(8)');
      });
      const a = app.post('/transfers', k, body);
      await reached.opened;
      await waitFor(() => leaseLapsed(db, k), 3000);
      const stale = await a;
      expect(stale.status).toBe(409);
      expect(stale.body.code).toBe('idempotency_key_in_use');

      const started = performance.now();
      const b = await app.post('/transfers', k, body);
      expect({ status: b.status, code: b.body.code }).toEqual({ status: 201, code: undefined });
      // Far less than the 8 s statement.
      expect(performance.now() - started).toBeLessThan(4_000);
      expect(await record(k)).toMatchObject({ status: 'completed', recovery_point: 'finished' });
      expect(await ledger(body.amount)).toEqual([
        { id: b.body.ledgerId, status: 'settled', provider_id: b.body.providerId },
      ]);
      expect(await sleeping()).toEqual([]);
    });
  });

  describe('with a 0.6 s lease renewed every 0.2 s', () => {
    const app = useApp(
      { execution: { lockTimeoutSeconds: 0.6 } },
      { foreignStepMarginSeconds: 0.1 },
    );

    it('aborts the signal of a foreign call whose key was taken over; its client gets 409', async () => {
      const k = newKey();
      const body = { amount: newAmount(), to: 'bob' };
      let seen: { aborted: boolean; reason: unknown } | undefined;
      let before: RecordRow | undefined;
      app.hooks.before.set('sent', async (ctx) => {
        before = await record(k);
        await db.query(
          'UPDATE idempotency_records SET owner_token = gen_random_uuid() WHERE idempotency_key = $1',
          [k],
        );
        await abortOf(ctx.signal);
        seen = { aborted: ctx.signal.aborted, reason: ctx.signal.reason };
        throw ctx.signal.reason;
      });
      const stale = await app.post('/transfers', k, body);
      expect(stale.status).toBe(409);
      expect(stale.body.code).toBe('idempotency_key_in_use');
      expect(stale.headers['retry-after']).toBe('1');
      expect(seen?.aborted).toBe(true);
      expect(String((seen?.reason as Error)?.message)).toMatch(/lost to another owner/);
      const after = await record(k);
      expect(after).toMatchObject({ status: 'in_flight', recovery_point: 'reserved' });
      expect(after.owner_token).not.toBe(before!.owner_token);
      expect(app.hooks.callsWith(sendKeyOf(after.record_id))).toEqual([]);
      expect(await ledger(body.amount)).toEqual([
        { id: expect.any(Number), status: 'pending', provider_id: null },
      ]);
    });
  });
});
