/**
 * SPEC §2 options: the defaults are the documented ones; every bad value fails at bootstrap (or
 * at decoration for `@Idempotent`) with an IdempotencyConfigurationError that names the option
 * and says how to fix it; route options merge handler over class over module, field by field.
 */
import { Controller, Get, Post } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DEFAULT_IDEMPOTENCY_OPTIONS,
  IDEMPOTENCY_OPTIONS,
  IdempotencyConfigurationError,
  IdempotencyError,
  IdempotencyModule,
  Idempotent,
  resolveIdempotencyOptions,
} from '../../lib';
import type { IdempotencyModuleOptions, ResolvedIdempotencyOptions } from '../../lib';
import { mergeRouteOptions } from '../../lib/idempotency.defaults';
import { IdempotencyRouteOptionsResolver } from '../../lib/idempotency-route-options.resolver';

function configurationError(fn: () => unknown): IdempotencyConfigurationError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect(error).toBeInstanceOf(IdempotencyError);
    return error as IdempotencyConfigurationError;
  }
  throw new Error('expected an IdempotencyConfigurationError, nothing was thrown');
}

describe('defaults (SPEC §2)', () => {
  const resolved = resolveIdempotencyOptions();

  it('match the documented table', () => {
    expect(resolved).toMatchObject({
      header: 'Idempotency-Key',
      required: true,
      ttlSeconds: 86400,
      lockTimeoutSeconds: 60,
      maxLockHoldSeconds: 3600,
      fingerprintHeaders: [],
      replayHeaders: [
        'content-type',
        'location',
        'content-language',
        'content-location',
        'etag',
        'last-modified',
      ],
      retryAfterSeconds: 1,
      purge: { enabled: true, intervalSeconds: 60, batchSize: 1000 },
      tableName: 'idempotency_records',
    });
    expect(resolveIdempotencyOptions({})).toEqual(resolved);
  });

  it('store 2xx, 3xx and 4xx except 408, 409, 425 and 429', () => {
    const expected: number[] = [];
    for (let s = 200; s <= 499; s++) if (![408, 409, 425, 429].includes(s)) expected.push(s);
    expect([...resolved.storeStatuses].sort((a, b) => a - b)).toEqual(expected);
    expect(resolved.storeStatuses).toEqual(
      expect.arrayContaining([200, 201, 204, 301, 400, 402, 404, 422]),
    );
    for (const s of [100, 199, 408, 409, 425, 429, 500, 502, 503, 504]) {
      expect(resolved.storeStatuses).not.toContain(s);
    }
  });

  it("scope the key by req.user.id, else ''", () => {
    expect(resolved.scope({ user: { id: 42 } })).toBe('42');
    expect(resolved.scope({ user: { id: 'u_1' } })).toBe('u_1');
    expect(resolved.scope({ user: {} })).toBe('');
    expect(resolved.scope({})).toBe('');
  });

  it('are the exported DEFAULT_IDEMPOTENCY_OPTIONS', () => {
    expect(DEFAULT_IDEMPOTENCY_OPTIONS.ttlSeconds).toBe(86400);
    expect(DEFAULT_IDEMPOTENCY_OPTIONS.tableName).toBe('idempotency_records');
    expect(Object.isFrozen(DEFAULT_IDEMPOTENCY_OPTIONS)).toBe(true);
  });

  it('take given values over defaults and ignore undefined ones', () => {
    const o = resolveIdempotencyOptions({ ttlSeconds: 30, lockTimeoutSeconds: undefined });
    expect(o.ttlSeconds).toBe(30);
    expect(o.lockTimeoutSeconds).toBe(60);
  });

  it('lower-case header lists', () => {
    const o = resolveIdempotencyOptions({
      fingerprintHeaders: ['X-Account-Id'],
      replayHeaders: ['Content-Type', 'X-Request-Id'],
    });
    expect(o.fingerprintHeaders).toEqual(['x-account-id']);
    expect(o.replayHeaders).toEqual(['content-type', 'x-request-id']);
  });

  it('replayCache: false turns the cache off and keeps its bounds', () => {
    expect(resolveIdempotencyOptions({ replayCache: false }).replayCache).toEqual({
      enabled: false,
      maxEntries: 10_000,
      maxBytes: 16 * 1024 * 1024,
    });
  });

  it('purge: false disables the schedule and keeps the rest', () => {
    expect(resolveIdempotencyOptions({ purge: false }).purge).toEqual({
      enabled: false,
      intervalSeconds: 60,
      batchSize: 1000,
    });
    expect(resolveIdempotencyOptions({ purge: { batchSize: 50 } }).purge).toEqual({
      enabled: true,
      intervalSeconds: 60,
      batchSize: 50,
    });
  });
});

describe('bad options fail with a message that names the option and the fix', () => {
  it.each<[string, IdempotencyModuleOptions, string, RegExp]>([
    ['negative ttl', { ttlSeconds: -1 }, 'ttlSeconds', /greater than 0/],
    ['zero ttl', { ttlSeconds: 0 }, 'ttlSeconds', /greater than 0/],
    ['NaN ttl', { ttlSeconds: NaN }, 'ttlSeconds', /greater than 0/],
    ['string ttl', { ttlSeconds: '60' as unknown as number }, 'ttlSeconds', /number of seconds/],
    ['zero lock timeout', { lockTimeoutSeconds: 0 }, 'lockTimeoutSeconds', /greater than 0/],
    ['zero max lock hold', { maxLockHoldSeconds: 0 }, 'maxLockHoldSeconds', /greater than 0/],
    ['fractional retryAfter', { retryAfterSeconds: 1.5 }, 'retryAfterSeconds', /whole number/],
    ['bad header name', { header: 'Idempotency Key' }, 'header', /HTTP header name/],
    ['empty header name', { header: '' }, 'header', /HTTP header name/],
    [
      'bad fingerprint header',
      { fingerprintHeaders: ['x account'] },
      'fingerprintHeaders',
      /array of header names/,
    ],
    ['storeStatuses out of range', { storeStatuses: [200, 600] }, 'storeStatuses', /100 to 599/],
    [
      'required not boolean',
      { required: 'yes' as unknown as boolean },
      'required',
      /true or false/,
    ],
    ['scope not a function', { scope: 'user' as never }, 'scope', /function/],
    ['tableName with a dash', { tableName: 'idempotency-records' }, 'tableName', /SQL identifier/],
    ['tableName upper case', { tableName: 'Records' }, 'tableName', /lower-case/],
    ['tableName with SQL', { tableName: 'x; DROP TABLE y' }, 'tableName', /SQL identifier/],
    ['tableName three parts', { tableName: 'a.b.c' }, 'tableName', /schema-qualified/],
    ['unknown store', { store: 'redis' as never }, 'store', /"typeorm", "memory" or a class/],
    ['empty dataSource', { dataSource: '' }, 'dataSource', /TypeOrmModule\.forRoot/],
    ['purge.batchSize 0', { purge: { batchSize: 0 } }, 'purge.batchSize', /greater than 0/],
    [
      'replayCache.maxEntries 0',
      { replayCache: { maxEntries: 0 } },
      'replayCache.maxEntries',
      /replayCache: false/,
    ],
    [
      'replayCache.maxBytes fractional',
      { replayCache: { maxBytes: 1.5 } },
      'replayCache.maxBytes',
      /whole number of bytes/,
    ],
    [
      'replayCache.enabled not a boolean',
      { replayCache: { enabled: 'yes' as never } },
      'replayCache.enabled',
      /true or false/,
    ],
    [
      'purge.intervalSeconds negative',
      { purge: { intervalSeconds: -5 } },
      'purge.intervalSeconds',
      /greater than 0/,
    ],
    [
      'relative problemTypeBaseUri',
      { problemTypeBaseUri: '/problems/' },
      'problemTypeBaseUri',
      /absolute URI/,
    ],
  ])('%s', (_label, options, option, fix) => {
    const error = configurationError(() => resolveIdempotencyOptions(options));
    expect(error.message).toContain(`option "${option}"`);
    expect(error.message).toMatch(fix);
  });

  it.each(['set-cookie', 'Set-Cookie', 'date', 'content-length', 'Transfer-Encoding'])(
    'refuses replayHeaders containing %s',
    (header) => {
      const error = configurationError(() =>
        resolveIdempotencyOptions({ replayHeaders: ['content-type', header] }),
      );
      expect(error.message).toContain('option "replayHeaders"');
      expect(error.message).toContain(`"${header.toLowerCase()}" cannot be replayed`);
      expect(error.message).toMatch(/Remove it/);
    },
  );
});

describe('@Idempotent()', () => {
  it('throws at decoration for a bad option', () => {
    const error = configurationError(() => {
      class Orders {
        @Idempotent({ ttlSeconds: -1 })
        create() {
          return 1;
        }
      }
      return Orders;
    });
    expect(error.message).toContain('option "ttlSeconds"');
  });

  it('throws at decoration on a class too', () => {
    configurationError(() => {
      @Idempotent({ replayHeaders: ['set-cookie'] })
      class Orders {}
      return Orders;
    });
  });
});

describe('route options merge handler over class over module, field by field', () => {
  const moduleOptions = resolveIdempotencyOptions({ ttlSeconds: 100, retryAfterSeconds: 3 });

  it('mergeRouteOptions', () => {
    const merged = mergeRouteOptions(
      moduleOptions,
      { ttlSeconds: 50, required: false, lockTimeoutSeconds: 5 },
      { ttlSeconds: 10, header: 'X-Key', required: undefined },
    );
    expect(merged.ttlSeconds).toBe(10); // handler
    expect(merged.header).toBe('X-Key'); // handler
    expect(merged.required).toBe(false); // class (handler's undefined does not erase it)
    expect(merged.lockTimeoutSeconds).toBe(5); // class
    expect(merged.retryAfterSeconds).toBe(3); // module
    expect(merged.maxLockHoldSeconds).toBe(3600); // default
    expect(moduleOptions.ttlSeconds).toBe(100); // the module's options are not changed
  });

  it('the resolver merges decorated class and handler, and leaves safe methods alone', () => {
    @Controller('orders')
    @Idempotent({ ttlSeconds: 50, required: false })
    class OrdersController {
      @Post()
      @Idempotent({ ttlSeconds: 10 })
      create() {
        return 'created';
      }

      @Post('other')
      other() {
        return 'other';
      }

      @Get()
      list() {
        return [];
      }
    }
    const resolver = new IdempotencyRouteOptionsResolver(moduleOptions);
    const context = (handler: unknown) =>
      ({
        getType: () => 'http',
        getHandler: () => handler,
        getClass: () => OrdersController,
      }) as unknown as ExecutionContext;
    const proto = OrdersController.prototype;

    expect(resolver.resolve(context(proto.create), 'POST')).toMatchObject({
      ttlSeconds: 10,
      required: false,
      retryAfterSeconds: 3,
    });
    expect(resolver.resolve(context(proto.other), 'POST')).toMatchObject({
      ttlSeconds: 50,
      required: false,
    });
    expect(resolver.resolve(context(proto.list), 'GET')).toBeUndefined();
    // The decorator keeps the handler working.
    expect(new OrdersController().create()).toBe('created');
  });
});

describe('IdempotencyModule bootstrap', () => {
  it('fails at compile() for a bad option in forRoot', async () => {
    const compiling = Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ ttlSeconds: 0, store: 'memory' })],
    }).compile();
    await expect(compiling).rejects.toThrow(IdempotencyConfigurationError);
    await expect(compiling).rejects.toThrow(/option "ttlSeconds".*greater than 0/);
  });

  it('fails at compile() for a bad option from a forRootAsync factory', async () => {
    const compiling = Test.createTestingModule({
      imports: [
        IdempotencyModule.forRootAsync({
          useFactory: () => ({ store: 'memory' as const, purge: { batchSize: 0 } }),
        }),
      ],
    }).compile();
    await expect(compiling).rejects.toThrow(/option "purge\.batchSize"/);
  });

  it('resolves good options at compile()', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ ttlSeconds: 5, store: 'memory', purge: false })],
    }).compile();
    try {
      const options = moduleRef.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
      expect(options.ttlSeconds).toBe(5);
      expect(options.purge.enabled).toBe(false);
    } finally {
      await moduleRef.close();
    }
  });
});
