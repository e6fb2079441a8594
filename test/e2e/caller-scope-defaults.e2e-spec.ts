/**
 * Defaults that keep callers apart (docs/options.md#the-scope), on Express and Fastify
 * against PostgreSQL: a `scope` resolver the application set that finds no caller for a request
 * has it refused before the claim (400 `idempotency_scope_missing`, the handler never runs); one
 * key space shared by every caller is said with `scope: () => SHARED_SCOPE`; `@Idempotent()` on
 * a GET, HEAD or OPTIONS handler is named in a warning at bootstrap.
 */
import { Controller, Get, Head, Logger, Post, UseGuards } from '@nestjs/common';
import type { CanActivate, ExecutionContext } from '@nestjs/common';
import request from 'supertest';
import { Idempotent, SHARED_SCOPE } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { Probe } from '../fixtures/orders.controller';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

/** Authentication that lets anonymous callers through: a known API key names its account. */
class ApiKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest();
    const accountId = { key_1: 'acct_1', key_2: 'acct_2' }[String(req.headers['x-api-key'])];
    if (accountId) req.user = { accountId };
    return true;
  }
}

@Controller('payments')
@UseGuards(ApiKeyGuard)
@Idempotent()
class PaymentsController {
  constructor(private readonly probe: Probe) {}

  @Post()
  create() {
    this.probe.count('create');
    return { run: this.probe.ran('create') };
  }

  @Post('null')
  @Idempotent({ request: { scope: () => null } })
  withNull() {
    this.probe.count('null');
    return {};
  }

  @Post('empty')
  @Idempotent({ request: { scope: () => '' } })
  withEmpty() {
    this.probe.count('empty');
    return {};
  }

  @Post('shared')
  @Idempotent({ request: { scope: () => SHARED_SCOPE } })
  shared() {
    this.probe.count('shared');
    return { run: this.probe.ran('shared') };
  }
}

@Controller('reports')
class ReportsController {
  constructor(private readonly probe: Probe) {}

  @Get()
  @Idempotent()
  list() {
    this.probe.count('list');
    return { run: this.probe.ran('list') };
  }

  @Head('latest')
  @Idempotent()
  latest() {
    return {};
  }
}

describe.each(ADAPTERS)('defaults that keep callers apart (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp;
  let warn: jest.SpyInstance;
  let warnings: string[];
  let n = 0;
  const newKey = () => `caller-${adapter}-${++n}-${Date.now()}`;

  beforeAll(async () => {
    db = await createTestDatabase();
    warn = jest.spyOn(Logger.prototype, 'warn');
    t = await createTestApp(adapter, db, {
      module: { request: { scope: (req) => req.user?.accountId } },
      controllers: [PaymentsController, ReportsController],
    });
    warnings = warn.mock.calls
      .filter((_call, i) => (warn.mock.contexts[i] as any)?.context === 'Idempotency')
      .map((call) => String(call[0]));
    warn.mockRestore();
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const post = (path: string, key: string, apiKey?: string) => {
    const req = request(t.server).post(path).set('Idempotency-Key', key);
    return apiKey === undefined ? req : req.set('X-Api-Key', apiKey);
  };
  const records = async (key: string) =>
    (await db.query('SELECT scope FROM idempotency_records WHERE idempotency_key = $1', [key])).map(
      (row: { scope: string }) => row.scope,
    );

  it.each([
    ['undefined (no account on the request)', '/payments', 'create'],
    ['null', '/payments/null', 'null'],
    ["''", '/payments/empty', 'empty'],
  ])(
    'a resolver that returns %s: 400 idempotency_scope_missing, nothing runs or is stored',
    async (_what, path, counter) => {
      const key = newKey();
      const before = t.probe.ran(counter);
      for (let i = 0; i < 2; i++) {
        const res = await post(path, key);
        expect(res.status).toBe(400);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.body).toMatchObject({
          status: 400,
          code: 'idempotency_scope_missing',
          title: 'The caller of this request is not identified',
        });
      }
      expect(t.probe.ran(counter) - before).toBe(0);
      expect(await records(key)).toEqual([]);
    },
  );

  it('an identified caller runs once and replays; another caller with the same key runs apart', async () => {
    const key = newKey();
    const before = t.probe.ran('create');
    const first = await post('/payments', key, 'key_1');
    const retry = await post('/payments', key, 'key_1');
    const other = await post('/payments', key, 'key_2');
    expect([first.status, retry.status, retry.headers['idempotent-replayed']]).toEqual([
      201,
      201,
      'true',
    ]);
    expect(retry.body).toEqual(first.body);
    expect([other.status, other.headers['idempotent-replayed']]).toEqual([201, undefined]);
    expect(t.probe.ran('create') - before).toBe(2);
    expect((await records(key)).sort()).toEqual(['acct_1', 'acct_2']);
  });

  it('scope: () => SHARED_SCOPE says every caller shares one key space', async () => {
    const key = newKey();
    const before = t.probe.ran('shared');
    const anonymous = await post('/payments/shared', key);
    const identified = await post('/payments/shared', key, 'key_1');
    expect([anonymous.status, identified.status]).toEqual([201, 201]);
    expect(identified.headers['idempotent-replayed']).toBe('true');
    expect(t.probe.ran('shared') - before).toBe(1);
    expect(await records(key)).toEqual([SHARED_SCOPE]);
  });

  it('@Idempotent() on GET and HEAD handlers: a warning at bootstrap with the fix', async () => {
    const safe = warnings.filter((message) => message.includes('safe methods'));
    expect(safe).toEqual([
      expect.stringContaining('@Idempotent() on GET /reports does nothing'),
      expect.stringContaining('@Idempotent() on HEAD /reports/latest does nothing'),
    ]);
    expect(safe[0]).toContain(
      'Remove @Idempotent() from it, or, if the route changes something, serve it as POST, PUT, ' +
        'PATCH or DELETE.',
    );
    // No scope warning: the module sets one.
    expect(warnings.filter((message) => /share one key space/.test(message))).toEqual([]);
    // The route itself is a plain GET: it runs on every request, keyed or not.
    const before = t.probe.ran('list');
    for (let i = 0; i < 2; i++) {
      const res = await request(t.server).get('/reports').set('Idempotency-Key', 'same');
      expect([res.status, res.headers['idempotent-replayed']]).toEqual([200, undefined]);
    }
    expect(t.probe.ran('list') - before).toBe(2);
  });
});
