/**
 * The operator tool (`nest-idempotency/cli`) against real PostgreSQL: records in each state are
 * made through a test app (clocks moved by SQL where a state needs time to pass, a crashed
 * instance's record made by SQL from a completed one), then `runIdempotencyCli()` runs with an
 * application module of its own, as an app's script would, and its JSON output, exit codes,
 * effects on retries and audit events are checked.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Injectable, Module } from '@nestjs/common';
import type { OnModuleInit } from '@nestjs/common';
import request from 'supertest';
import { IdempotencyEvents, IdempotencyModule } from '../../lib';
import type { IdempotencyEvent } from '../../lib';
import { runIdempotencyCli } from '../../lib/cli';
import { IdempotencyOperations, IdempotencyPhasesModule } from '../../lib/phases';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { runOperatorCliProcess } from '../fixtures/operator-cli-process';
import { OrdersController } from '../fixtures/orders.controller';
import { TRANSFERS, TransferHooks } from '../fixtures/phased-transfers';
import type { TransferInput } from '../fixtures/phased-transfers';
import { createTestApp, testTypeOrmModule } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';
import { waitFor } from '../fixtures/wait-for';

const RECORDS = 'idempotency_records';

describe('operator tool (runIdempotencyCli)', () => {
  let db: TestDatabase;
  let t: TestApp;
  let hooks: TransferHooks;
  /** Events the CLI's application emitted, as the app's own audit subscriber sees them. */
  const audit: IdempotencyEvent[] = [];
  let CliAppModule: any;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await createTestApp('express', db, {
      controllers: [OrdersController, ...TRANSFERS.controllers],
      providers: TRANSFERS.providers,
      migrations: TRANSFERS.migrations,
      phases: { completer: { enabled: false }, jobs: false },
    });
    hooks = t.app.get(TransferHooks);

    @Injectable()
    class AuditTrail implements OnModuleInit {
      constructor(private readonly events: IdempotencyEvents) {}
      onModuleInit(): void {
        this.events.subscribe((event) => audit.push(event));
      }
    }
    // The app's module as its script would pass it: schedules on (short), which the CLI's
    // context must not run.
    @Module({
      imports: [
        testTypeOrmModule(db.url),
        IdempotencyModule.forRoot({ purge: { enabled: true, intervalSeconds: 1 } }),
        IdempotencyPhasesModule.forRoot({ completer: { enabled: true, intervalSeconds: 1 } }),
      ],
      providers: [AuditTrail],
    })
    class Module_ {}
    CliAppModule = Module_;
  });

  afterAll(async () => {
    t?.probe.open('live#1');
    await t?.close();
    await db?.drop();
  });

  /** Runs the CLI; its JSON output parsed. */
  const cli = async (...argv: string[]) => {
    let out = '';
    let err = '';
    const code = await runIdempotencyCli(CliAppModule, argv, {
      stdout: (text) => (out += text),
      stderr: (text) => (err += text),
      logger: false,
    });
    let json: any;
    try {
      json = JSON.parse(out);
    } catch {
      json = undefined;
    }
    return { code, out, err, json };
  };

  const order = (key: string, body: Record<string, unknown>) =>
    request(t.server).post('/orders').set('Idempotency-Key', key).send(body);
  const transfer = (key: string, body: TransferInput) =>
    request(t.server).post('/transfers').set('Idempotency-Key', key).send(body);
  const record = async (key: string) =>
    (
      await db.query(
        `SELECT scope, status, locked_until IS NOT NULL AS leased FROM ${RECORDS}
          WHERE idempotency_key = $1`,
        [key],
      )
    )[0];
  const actions = () => audit.filter((event) => event.type === 'operator_action');

  it('answers a wrong command line with usage and exit code 2, without starting the app', async () => {
    for (const argv of [
      [],
      ['list', 'everything'],
      ['inspect', 'only-scope'],
      ['purge', '--body'],
      ['list', 'stuck', '--limit', 'many'],
      ['inspect', '', 'k', '--format', 'xml'],
      ['resolve', '', 'k', '--response-file', join(tmpdir(), 'missing-operator-file.json')],
    ]) {
      const result = await cli(...argv);
      expect([argv, result.code, result.out]).toEqual([argv, 2, '']);
      expect(result.err).toContain('Usage:');
    }
    expect((await cli('--help')).code).toBe(0);
  });

  it('says clearly that a store without the operator ability cannot serve it (exit code 1)', async () => {
    @Module({ imports: [IdempotencyModule.forRoot({ store: 'memory' })] })
    class MemoryAppModule {}
    let out = '';
    let err = '';
    const code = await runIdempotencyCli(MemoryAppModule, ['list', 'stuck'], {
      stdout: (text) => (out += text),
      stderr: (text) => (err += text),
      logger: false,
    });
    expect([code, out]).toEqual([1, '']);
    expect(err).toContain('the idempotency store has no operator ability');
  });

  it('inspects a completed key without its body, with it on --body, and as a table', async () => {
    expect((await order('done-1', { amount: 7 })).status).toBe(201);
    const { scope } = await record('done-1');

    const plain = await cli('inspect', scope, 'done-1');
    expect(plain.code).toBe(0);
    expect(plain.json).toMatchObject({
      scope,
      key: 'done-1',
      status: 'completed',
      stuck: false,
      method: 'POST',
      path: '/orders',
      operation: null,
      recoveryPoint: null,
      attempts: 1,
      leaseSecondsLeft: null,
      storedStatus: 201,
    });
    expect(new Date(plain.json.expiresAt).getTime()).toBeGreaterThan(Date.now());
    expect(plain.json).not.toHaveProperty('body');

    const withBody = await cli('inspect', scope, 'done-1', '--body');
    expect(JSON.parse(withBody.json.body)).toMatchObject({ amount: 7, unicode: 'Grüße €' });

    const table = await cli('inspect', scope, 'done-1', '--format', 'table');
    expect(table.code).toBe(0);
    expect(table.out).toMatch(/^status\s+completed$/m);
    expect(table.out).toMatch(/^storedStatus\s+201$/m);

    const missing = await cli('inspect', scope, 'no-such-key');
    expect([missing.code, missing.json]).toEqual([
      1,
      { error: 'not_found', command: 'inspect', scope, key: 'no-such-key' },
    ]);
  });

  it('lists in-flight and stuck keys, refuses to release a live lease and frees a lapsed one', async () => {
    // A live lease: a request whose handler waits on a gate.
    const live = order('live-1', { amount: 8, gate: 'live' }).then((res) => res);
    await waitFor(async () => (await record('live-1'))?.status === 'in_flight');
    const { scope } = await record('live-1');
    // A crashed instance's record: in flight, its lease lapsed a minute ago. Written by SQL
    // (the claim of a request like done-1's), so this instance's replay cache never saw it.
    await db.query(
      `INSERT INTO ${RECORDS} (scope, idempotency_key, record_id, fingerprint, status, owner_token,
              locked_until, expires_at, purge_after, attempts, method, path)
       SELECT scope, 'stuck-1', gen_random_uuid(), fingerprint, 'in_flight', gen_random_uuid(),
              now() - interval '1 minute', expires_at, purge_after, 1, method, path
         FROM ${RECORDS} WHERE idempotency_key = 'done-1'`,
    );

    const inFlight = await cli('list', 'in-flight');
    expect(inFlight.code).toBe(0);
    const byKey = Object.fromEntries(inFlight.json.map((r: any) => [r.key, r]));
    expect(Object.keys(byKey).sort()).toEqual(['live-1', 'stuck-1']);
    expect(byKey['live-1'].stuck).toBe(false);
    expect(byKey['live-1'].leaseSecondsLeft).toBeGreaterThan(0);
    expect(byKey['stuck-1']).toMatchObject({ stuck: true, leaseSecondsLeft: 0 });
    const stuck = await cli('list', 'stuck', '--limit', '10');
    expect(stuck.json.map((r: any) => r.key)).toEqual(['stuck-1']);
    expect((await cli('list', 'in-flight', '--limit', '1')).json).toHaveLength(1);

    const refused = await cli('release', scope, 'live-1');
    expect([refused.code, refused.json]).toEqual([
      1,
      { action: 'release', scope, key: 'live-1', result: 'refused', reason: 'lease_live' },
    ]);
    expect(await record('live-1')).toMatchObject({ status: 'in_flight', leased: true });
    expect((await order('live-1', { amount: 8, gate: 'live' })).status).toBe(409);

    const runsBefore = t.probe.ran('create');
    const released = await cli('release', scope, 'stuck-1');
    expect([released.code, released.json]).toEqual([
      0,
      { action: 'release', scope, key: 'stuck-1', result: 'done' },
    ]);
    expect(await record('stuck-1')).toMatchObject({ status: 'released', leased: false });
    const retry = await order('stuck-1', { amount: 7 });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(t.probe.ran('create')).toBe(runsBefore + 1);

    // Released once, it is no longer in flight: a second release is refused.
    const again = await cli('release', scope, 'stuck-1');
    expect([again.code, again.json.reason]).toEqual([1, 'not_in_flight']);
    expect((await cli('release', scope, 'nobody')).json.result).toBe('not_found');

    t.probe.open('live#1');
    expect((await live).status).toBe(201);
    expect(actions().slice(-4)).toEqual([
      {
        type: 'operator_action',
        action: 'release',
        scope,
        key: 'live-1',
        result: 'refused',
        reason: 'lease_live',
      },
      { type: 'operator_action', action: 'release', scope, key: 'stuck-1', result: 'done' },
      {
        type: 'operator_action',
        action: 'release',
        scope,
        key: 'stuck-1',
        result: 'refused',
        reason: 'not_in_flight',
      },
      { type: 'operator_action', action: 'release', scope, key: 'nobody', result: 'not_found' },
    ]);
  });

  it('lists an abandoned operation and resolves it: a retry replays the given response', async () => {
    const body = { amount: 42, to: 'acct_42' };
    hooks.providerAnswers.push('throw');
    expect((await transfer('abandoned-1', body)).status).toBe(500);
    await db.query(
      `UPDATE ${RECORDS} SET status = 'abandoned', owner_token = NULL, locked_until = NULL
        WHERE idempotency_key = 'abandoned-1'`,
    );
    const { scope } = await record('abandoned-1');

    const listed = await cli('list', 'abandoned');
    expect(listed.json).toEqual([
      expect.objectContaining({
        key: 'abandoned-1',
        status: 'abandoned',
        operation: expect.any(String),
        recoveryPoint: 'reserved',
      }),
    ]);
    expect((await transfer('abandoned-1', body)).status).toBe(409);

    const dir = mkdtempSync(join(tmpdir(), 'operator-cli-'));
    const file = join(dir, 'response.json');
    writeFileSync(
      file,
      JSON.stringify({
        status: 201,
        body: { ledgerId: 0, providerId: 'manual', amount: 42 },
        headers: { 'content-type': 'application/json' },
      }),
    );
    const resolved = await cli('resolve', scope, 'abandoned-1', '--response-file', file);
    expect([resolved.code, resolved.json]).toEqual([
      0,
      { action: 'resolve', scope, key: 'abandoned-1', result: 'done' },
    ]);
    const stepRuns = new Map(hooks.stepRuns);
    const retry = await transfer('abandoned-1', body);
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual({ ledgerId: 0, providerId: 'manual', amount: 42 });
    expect(hooks.stepRuns).toEqual(stepRuns);
    expect((await cli('list', 'abandoned')).json).toEqual([]);

    // No longer abandoned, and a key that never existed.
    const notAbandoned = await cli('resolve', scope, 'abandoned-1', '--response-file', file);
    expect([notAbandoned.code, notAbandoned.json.result]).toEqual([1, 'refused']);
    const missing = await cli('resolve', scope, 'never-was');
    expect([missing.code, missing.json.result]).toEqual([1, 'not_found']);
    expect(actions().slice(-3)).toEqual([
      { type: 'operator_action', action: 'resolve', scope, key: 'abandoned-1', result: 'done' },
      expect.objectContaining({ action: 'resolve', key: 'abandoned-1', result: 'refused' }),
      { type: 'operator_action', action: 'resolve', scope, key: 'never-was', result: 'not_found' },
    ]);
  });

  describe('refuses an answer Node.js cannot send, and stores nothing', () => {
    const body = { amount: 43, to: 'acct_43' };
    let scope: string;
    /** The abandoned record's columns a resolution would change. */
    const row = async (key: string) =>
      (
        await db.query(
          `SELECT status, response_status, response_headers, response_body, expires_at
             FROM ${RECORDS} WHERE idempotency_key = $1`,
          [key],
        )
      )[0];
    const abandon = async (key: string) => {
      hooks.providerAnswers.push('throw');
      expect((await transfer(key, body)).status).toBe(500);
      await db.query(
        `UPDATE ${RECORDS} SET status = 'abandoned', owner_token = NULL, locked_until = NULL
          WHERE idempotency_key = $1`,
        [key],
      );
      scope = (await record(key)).scope;
      return row(key);
    };
    const answers = {
      'CR/LF in a header value': {
        status: 201,
        body: { ok: true },
        headers: { 'content-type': 'application/json', location: '/a\r\nSet-Cookie: x=1' },
      },
      'a status out of range': { status: 1000, body: { ok: true } },
      'a header name with a space': { status: 201, body: {}, headers: { 'bad name': 'v' } },
    };

    /** Runs `resolve` with `answer` in a response file: in a real process, or in this one. */
    const resolveWithFile = async (key: string, answer: unknown, process: boolean) => {
      const file = join(mkdtempSync(join(tmpdir(), 'operator-cli-')), 'response.json');
      writeFileSync(file, JSON.stringify(answer));
      const argv = ['resolve', scope, key, '--response-file', file];
      if (!process) return { file, ...(await cli(...argv)) };
      const run = await runOperatorCliProcess(db.url, argv);
      return { file, code: run.code, out: run.stdout, err: run.stderr };
    };

    it.each(Object.entries(answers))(
      'resolve --response-file with %s: a clear error, a non-zero exit, the row unchanged',
      async (label, answer) => {
        const key = `bad-file-${Object.keys(answers).indexOf(label)}`;
        const before = await abandon(key);
        // The CLI as an app's script runs it, once; the other answers in this process.
        const inProcess = label !== 'CR/LF in a header value';
        const run = await resolveWithFile(key, answer, !inProcess);
        expect([run.code, run.out]).toEqual([2, '']);
        expect(run.err).toContain(`--response-file ${run.file} is refused`);
        expect(await row(key)).toEqual(before);
        // Still abandoned: a retry is told so (409), not failed by a stored answer (500).
        expect((await transfer(key, body)).status).toBe(409);
      },
      // One case starts a Node.js process through ts-node: about 4 s of CPU, which a busy
      // machine (2 cores, 20 runnable tasks) stretched to 27 s of wall time.
      120_000,
    );

    it.each(Object.entries(answers))(
      'resolveAbandoned() with %s throws a clear error and leaves the row unchanged',
      async (label, answer) => {
        const key = `bad-api-${Object.keys(answers).indexOf(label)}`;
        const before = await abandon(key);
        const operations = t.app.get(IdempotencyOperations);
        await expect(
          operations.resolveAbandoned(scope, key, { response: answer as any }),
        ).rejects.toThrow(/resolveAbandoned\(\) refused a response with .*nothing was stored/);
        expect(await row(key)).toEqual(before);
        expect((await transfer(key, body)).status).toBe(409);
      },
    );
  });

  it('purges expired records now and prints the count', async () => {
    expect((await order('expired-1', { amount: 10 })).status).toBe(201);
    await db.query(
      `UPDATE ${RECORDS} SET expires_at = now() - interval '1 hour',
              purge_after = now() - interval '1 hour'
        WHERE idempotency_key = 'expired-1'`,
    );
    const purged = await cli('purge');
    expect([purged.code, purged.json]).toEqual([0, { action: 'purge', result: 'done', count: 1 }]);
    expect(await record('expired-1')).toBeUndefined();
    expect(await record('done-1')).toBeDefined();
    expect(actions().slice(-1)).toEqual([
      { type: 'operator_action', action: 'purge', result: 'done', count: 1 },
    ]);
    // The purge's own event, from the same run.
    expect(audit).toContainEqual(expect.objectContaining({ type: 'purged', count: 1 }));
  });
});
