/**
 * With the default scope (`req.user?.id`), callers without `req.user.id` share one key space: the
 * module says so once at bootstrap, naming the idempotent routes that set no scope of their own
 * and how to set one; it says nothing when the module sets a scope. On Express and Fastify.
 */
import { Controller, Delete, Get, Logger, Post, Put } from '@nestjs/common';
import { Idempotent, SkipIdempotency } from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS, createTestApp } from '../fixtures/test-app';
import type { TestApp } from '../fixtures/test-app';

@Controller('payments')
@Idempotent()
class PaymentsController {
  @Post()
  create() {
    return {};
  }

  @Get()
  list() {
    return [];
  }

  @Put(':id')
  update() {
    return {};
  }

  @Post('quote')
  @SkipIdempotency()
  quote() {
    return {};
  }
}

@Controller('/refunds/')
class RefundsController {
  @Post()
  @Idempotent({ request: { scope: (req) => req.headers['x-account-id'] } })
  create() {
    return {};
  }

  @Post('bulk')
  @Idempotent()
  bulk() {
    return {};
  }

  @Delete(':id')
  cancel() {
    return {};
  }
}

describe.each(ADAPTERS)('the shared-scope warning at bootstrap (%s)', (adapter) => {
  let db: TestDatabase;
  let t: TestApp | undefined;
  let warn: jest.SpyInstance;

  /** What the module logged as a warning under the 'Idempotency' context about the scope. */
  const scopeWarnings = () =>
    warn.mock.calls
      .filter((_call, i) => (warn.mock.contexts[i] as any)?.context === 'Idempotency')
      .map((call) => String(call[0]))
      .filter((message) => /scope/i.test(message));

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn');
  });
  afterEach(async () => {
    warn.mockRestore();
    await t?.close();
    t = undefined;
  });

  it('without a scope: one warning naming the routes that share the key space', async () => {
    t = await createTestApp(adapter, db, {
      controllers: [PaymentsController, RefundsController],
    });
    const warnings = scopeWarnings();
    expect(warnings).toHaveLength(1);
    const [warning] = warnings;
    const named = warning.match(/(?:POST|PUT|DELETE|GET|PATCH) \/[\w/:]*/g);
    expect(named?.sort()).toEqual(['POST /payments', 'POST /refunds/bulk', 'PUT /payments/:id']);
    expect(warning).toContain('without req.user.id');
    expect(warning).toContain('share one key space');
    expect(warning).toContain('scope: (req) => req.user.accountId');
    expect(warning).toContain('refused (400 idempotency_scope_missing)');
    expect(warning).toContain('scope: () => SHARED_SCOPE');
  });

  it('with a scope in forRoot(): no warning', async () => {
    t = await createTestApp(adapter, db, {
      module: { request: { scope: (req) => req.headers['x-account-id'] } },
      controllers: [PaymentsController, RefundsController],
    });
    expect(scopeWarnings()).toEqual([]);
  });
});
