/**
 * docs/design/contract.md#options-and-defaults options: the defaults are the documented ones; every bad value fails at bootstrap (or
 * at decoration for `@Idempotent`) with an IdempotencyConfigurationError that names the option
 * and says how to fix it; route options merge handler over class over module, field by field.
 */
import { normaliseScope } from '../../lib/utils/request-scope';
import { Controller, Get, Post } from '@nestjs/common';
import type { ExecutionContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  DEFAULT_IDEMPOTENCY_OPTIONS,
  IdempotencyConfigurationError,
  IdempotencyError,
  IdempotencyModule,
  Idempotent,
} from '../../lib';
import { IDEMPOTENCY_OPTIONS } from '../../lib/config/idempotency.tokens';
import { resolveIdempotencyOptions } from '../../lib/config/idempotency.defaults';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../shared/markdown';
import type { IdempotencyModuleOptions, IdempotencyRouteOptions } from '../../lib';
import type { ResolvedIdempotencyOptions } from '../../lib/interfaces/idempotency-module-options.interface';
import {
  OPTION_LIMITS,
  mergeRouteOptions,
  optionPlace,
  validateRouteGroups,
  validateRouteOptions,
} from '../../lib/config/idempotency.defaults';
import type { IdempotencyLimitedOption } from '../../lib/config/idempotency.defaults';
import { IdempotencyRouteOptionsResolver } from '../../lib/decorators/idempotency-route-options.resolver';

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

describe('defaults (docs/design/contract.md#options-and-defaults)', () => {
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
      store: 'typeorm',
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
    const scopeOf = (request: unknown) => normaliseScope(resolved.scope(request));
    expect(scopeOf({ user: { id: 42 } })).toBe('42');
    expect(scopeOf({ user: { id: 'u_1' } })).toBe('u_1');
    expect(scopeOf({ user: {} })).toBe('');
    expect(scopeOf({})).toBe('');
    // An id that identifies nobody in particular is refused, not turned into "[object Object]".
    expect(() => scopeOf({ user: { id: {} } })).toThrow(/scope/);
  });

  it('are the exported DEFAULT_IDEMPOTENCY_OPTIONS', () => {
    expect(DEFAULT_IDEMPOTENCY_OPTIONS.responses.ttlSeconds).toBe(86400);
    expect(Object.isFrozen(DEFAULT_IDEMPOTENCY_OPTIONS)).toBe(true);
  });

  it('take given values over defaults and ignore undefined ones', () => {
    const o = resolveIdempotencyOptions({
      responses: { ttlSeconds: 30 },
      execution: { lockTimeoutSeconds: undefined },
    });
    expect(o.ttlSeconds).toBe(30);
    expect(o.lockTimeoutSeconds).toBe(60);
  });

  it('lower-case header lists', () => {
    const o = resolveIdempotencyOptions({
      request: { fingerprintHeaders: ['X-Account-Id'] },
      responses: { replayHeaders: ['Content-Type', 'X-Request-Id'] },
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
      abandonedRetentionSeconds: 2_592_000,
    });
    expect(resolveIdempotencyOptions({ purge: { batchSize: 50 } }).purge).toEqual({
      enabled: true,
      intervalSeconds: 60,
      batchSize: 50,
      abandonedRetentionSeconds: 2_592_000,
    });
  });
});

describe('bad options fail with a message that names the option and the fix', () => {
  it.each<[string, IdempotencyModuleOptions, string, RegExp]>([
    [
      'negative ttl',
      { responses: { ttlSeconds: -1 } },
      'responses.ttlSeconds',
      /from 0\.1 to 315360000/,
    ],
    [
      'zero ttl',
      { responses: { ttlSeconds: 0 } },
      'responses.ttlSeconds',
      /from 0\.1 to 315360000/,
    ],
    [
      'NaN ttl',
      { responses: { ttlSeconds: NaN } },
      'responses.ttlSeconds',
      /from 0\.1 to 315360000/,
    ],
    [
      'non-numeric ttl',
      { responses: { ttlSeconds: 'abc' as unknown as number } },
      'responses.ttlSeconds',
      /number of seconds/,
    ],
    [
      'zero lock timeout',
      { execution: { lockTimeoutSeconds: 0 } },
      'execution.lockTimeoutSeconds',
      /from 0\.1 to 86400/,
    ],
    [
      'zero max lock hold',
      { execution: { maxLockHoldSeconds: 0 } },
      'execution.maxLockHoldSeconds',
      /from 0\.1/,
    ],
    [
      'fractional retryAfter',
      { errors: { retryAfterSeconds: 1.5 } },
      'errors.retryAfterSeconds',
      /whole number/,
    ],
    [
      'bad header name',
      { request: { header: 'Idempotency Key' } },
      'request.header',
      /HTTP header name/,
    ],
    ['empty header name', { request: { header: '' } }, 'request.header', /HTTP header name/],
    [
      'bad fingerprint header',
      { request: { fingerprintHeaders: ['x account'] } },
      'request.fingerprintHeaders',
      /array of header names/,
    ],
    [
      'storeStatuses out of range',
      { responses: { storeStatuses: [200, 600] } },
      'responses.storeStatuses',
      /100 to 599/,
    ],
    [
      'required not boolean',
      { request: { required: 'yes' as unknown as boolean } },
      'request.required',
      /true or false/,
    ],
    ['scope not a function', { request: { scope: 'user' as never } }, 'request.scope', /function/],
    ['unknown store', { store: 'redis' as never }, 'store', /typeOrmStore\(\{ \.\.\. \}\)/],
    ['purge.batchSize 0', { purge: { batchSize: 0 } }, 'purge.batchSize', /from 1 to 100000/],
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
      /from 0\.1 to 2147483/,
    ],
    [
      'relative problemTypeBaseUri',
      { errors: { problemTypeBaseUri: '/problems/' } },
      'errors.problemTypeBaseUri',
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
        resolveIdempotencyOptions({ responses: { replayHeaders: ['content-type', header] } }),
      );
      expect(error.message).toContain('option "responses.replayHeaders"');
      expect(error.message).toContain(`"${header.toLowerCase()}" cannot be replayed`);
      expect(error.message).toMatch(/Remove it/);
    },
  );
});

describe('numeric options have a range the library can honour (OPTION_LIMITS)', () => {
  const limited = Object.keys(OPTION_LIMITS) as IdempotencyLimitedOption[];
  const routeLevel: IdempotencyLimitedOption[] = [
    'ttlSeconds',
    'lockTimeoutSeconds',
    'maxLockHoldSeconds',
    'retryAfterSeconds',
    'maxRequestBytes',
    'maxResponseBytes',
  ];

  /** Module options that set one (possibly nested) numeric option. */
  function withOption(option: IdempotencyLimitedOption, value: number): IdempotencyModuleOptions {
    const [group, field] = optionPlace(option).split('.');
    return (
      field ? { [group]: { [field]: value } } : { [group]: value }
    ) as IdempotencyModuleOptions;
  }

  function resolvedValue(option: IdempotencyLimitedOption, value: number): unknown {
    const resolved = resolveIdempotencyOptions(withOption(option, value)) as unknown as Record<
      string,
      Record<string, unknown>
    >;
    const [group, field] = option.split('.');
    return field ? resolved[group][field] : resolved[group];
  }

  /** The closest refused values on either side of the range. */
  function pastEdges(option: IdempotencyLimitedOption): [number, number] {
    const { min, max, integer } = OPTION_LIMITS[option];
    if (integer) return [min - 1, max + 1];
    return [min === 0 ? -0.001 : min - min / 1000, max + 0.001];
  }

  function expectRefusal(option: string, value: number, fn: () => unknown): string {
    const { message } = configurationError(fn);
    const { min, max, example } = OPTION_LIMITS[option as IdempotencyLimitedOption];
    expect(message).toContain(`option "${optionPlace(option)}" is invalid`);
    if (Number.isFinite(value)) expect(message).toContain(`(got ${value})`);
    expect(message).toContain(` from ${min} to ${max}, e.g. ${example}.`);
    return message;
  }

  it('has a range for every numeric option, the default inside it', () => {
    expect([...limited].sort()).toEqual(
      [
        ...routeLevel,
        'purge.intervalSeconds',
        'purge.batchSize',
        'replayCache.maxEntries',
        'replayCache.maxBytes',
        'purge.abandonedRetentionSeconds',
        'wait.maxSeconds',
        'wait.defaultSeconds',
        'wait.pollIntervalSeconds',
        'maxWaiters',
      ].sort(),
    );
    for (const option of limited) {
      const { min, max, example } = OPTION_LIMITS[option];
      expect(min).toBeLessThan(max);
      expect(example).toBeGreaterThanOrEqual(min);
      expect(example).toBeLessThanOrEqual(max);
      expect(resolvedValue(option, example)).toBe(example);
    }
    expect(Object.isFrozen(OPTION_LIMITS)).toBe(true);
    expect(Object.isFrozen(OPTION_LIMITS.ttlSeconds)).toBe(true);
  });

  it('uses the documented bounds', () => {
    expect(OPTION_LIMITS).toMatchObject({
      lockTimeoutSeconds: { min: 0.1, max: 86_400, integer: false },
      maxLockHoldSeconds: { min: 0.1, max: 31_536_000, integer: false },
      ttlSeconds: { min: 0.1, max: 315_360_000, integer: false },
      retryAfterSeconds: { min: 0, max: 86_400, integer: true },
      'purge.intervalSeconds': { min: 0.1, max: 2_147_483, integer: false },
      'purge.batchSize': { min: 1, max: 100_000, integer: true },
      'replayCache.maxEntries': { min: 1, max: 10_000_000, integer: true },
      'replayCache.maxBytes': { min: 1, max: 4 * 1024 ** 3, integer: true },
    });
    // setInterval fires every millisecond past 2^31-1 ms; the longest period stays under it.
    expect(OPTION_LIMITS['purge.intervalSeconds'].max * 1000).toBeLessThanOrEqual(2 ** 31 - 1);
    // The heartbeat renews every third of the lease: the longest lease's period fits setInterval.
    expect((OPTION_LIMITS.lockTimeoutSeconds.max * 1000) / 3).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  describe.each(Object.keys(OPTION_LIMITS) as IdempotencyLimitedOption[])('%s', (option) => {
    const { min, max, integer } = OPTION_LIMITS[option];
    const [below, above] = pastEdges(option);

    it(`accepts ${min} and ${max}, its edges`, () => {
      expect(resolvedValue(option, min)).toBe(min);
      expect(resolvedValue(option, max)).toBe(max);
    });

    it(`refuses ${below} and ${above}, just past them, with the range and an example`, () => {
      expectRefusal(option, below, () => resolveIdempotencyOptions(withOption(option, below)));
      expectRefusal(option, above, () => resolveIdempotencyOptions(withOption(option, above)));
    });

    it('refuses NaN, Infinity and -Infinity', () => {
      for (const value of [NaN, Infinity, -Infinity]) {
        expectRefusal(option, value, () => resolveIdempotencyOptions(withOption(option, value)));
      }
    });

    if (integer) {
      it('refuses a fraction', () => {
        const message = expectRefusal(option, min + 0.5, () =>
          resolveIdempotencyOptions(withOption(option, min + 0.5)),
        );
        expect(message).toContain('Use a whole number of');
      });
    }
  });

  describe('the values from the issue are refused at bootstrap', () => {
    it('lockTimeoutSeconds: 0.001 (a lease shorter than the heartbeat can renew)', () => {
      const message = expectRefusal('lockTimeoutSeconds', 0.001, () =>
        resolveIdempotencyOptions({ execution: { lockTimeoutSeconds: 0.001 } }),
      );
      expect(message).toMatch(/renewed every third of it/);
      expect(message).toMatch(/values under 1 s are for tests/);
    });

    it('purge.intervalSeconds: 3e6 (past setInterval, which would fire every millisecond)', () => {
      const message = expectRefusal('purge.intervalSeconds', 3e6, () =>
        resolveIdempotencyOptions({ purge: { intervalSeconds: 3e6 } }),
      );
      expect(message).toMatch(/setInterval/);
    });

    it('ttlSeconds: 1e13 (an interval PostgreSQL cannot add to now())', () => {
      const message = expectRefusal('ttlSeconds', 1e13, () =>
        resolveIdempotencyOptions({ responses: { ttlSeconds: 1e13 } }),
      );
      expect(message).toMatch(/10 years/);
    });

    it('and by the module at compile()', async () => {
      const compiling = Test.createTestingModule({
        imports: [
          IdempotencyModule.forRoot({ execution: { lockTimeoutSeconds: 0.001 }, store: 'memory' }),
        ],
      }).compile();
      await expect(compiling).rejects.toThrow(
        /option "execution.lockTimeoutSeconds".*from 0\.1 to 86400/,
      );
    });
  });

  it('accepts the short leases the test suite runs with', () => {
    for (const seconds of [0.1, 0.2, 0.3, 0.6]) {
      const o = resolveIdempotencyOptions({
        execution: { lockTimeoutSeconds: seconds },
        responses: { ttlSeconds: seconds },
      });
      expect(o.lockTimeoutSeconds).toBe(seconds);
    }
  });

  describe('per route, through validateRouteOptions and @Idempotent()', () => {
    it.each(routeLevel)('%s: edges accepted, just past them refused', (option) => {
      const { min, max } = OPTION_LIMITS[option];
      const [below, above] = pastEdges(option);
      expect(validateRouteOptions({ [option]: min })).toEqual({ [option]: min });
      expect(validateRouteOptions({ [option]: max })).toEqual({ [option]: max });
      for (const value of [below, above, NaN, Infinity]) {
        expectRefusal(option, value, () => validateRouteOptions({ [option]: value }));
      }
    });

    it.each<[IdempotencyLimitedOption, number]>([
      ['lockTimeoutSeconds', 0.001],
      ['ttlSeconds', 1e13],
    ])('refuses %s: %d from the issue', (option, value) => {
      expectRefusal(option, value, () => validateRouteOptions({ [option]: value }));
      expectRefusal(option, value, () => {
        class Payments {
          @Idempotent(withOption(option, value) as IdempotencyRouteOptions)
          create() {
            return 1;
          }
        }
        return Payments;
      });
    });
  });
});

describe('options read from the environment arrive as strings (ConfigService)', () => {
  /** What `config.get<number>('X')` really returns: the text of the variable. */
  const text = (value: string) => value as unknown as number;
  const flag = (value: string) => value as unknown as boolean;

  function withText(option: IdempotencyLimitedOption, value: string): IdempotencyModuleOptions {
    const [group, field] = optionPlace(option).split('.');
    return (
      field ? { [group]: { [field]: value } } : { [group]: value }
    ) as IdempotencyModuleOptions;
  }

  function valueOf(resolved: ResolvedIdempotencyOptions, option: string): unknown {
    const [group, field] = option.split('.');
    const top = (resolved as unknown as Record<string, any>)[group];
    return field ? top[field] : top;
  }

  it.each(Object.keys(OPTION_LIMITS) as IdempotencyLimitedOption[])(
    '%s: a numeric string is taken as its number',
    (option) => {
      const { example } = OPTION_LIMITS[option];
      const resolved = resolveIdempotencyOptions(withText(option, ` ${example} `));
      expect(valueOf(resolved, option)).toBe(example);
    },
  );

  it('takes decimals, a sign and an exponent as written', () => {
    const resolved = resolveIdempotencyOptions({
      execution: { lockTimeoutSeconds: text('0.5') },
      responses: { ttlSeconds: text('+1e3') },
      errors: { retryAfterSeconds: text('.0e1') },
    });
    expect(resolved).toMatchObject({
      lockTimeoutSeconds: 0.5,
      ttlSeconds: 1000,
      retryAfterSeconds: 0,
    });
  });

  it.each(['abc', '', '  ', '0x10', 'Infinity', '1,5', '3s', '1_000'])(
    'refuses %j and says environment values are strings',
    (value) => {
      const { message } = configurationError(() =>
        resolveIdempotencyOptions({ responses: { ttlSeconds: text(value) } }),
      );
      expect(message).toContain(
        `option "responses.ttlSeconds" is invalid (got ${JSON.stringify(value)})`,
      );
      expect(message).toContain('from 0.1 to 315360000, e.g. 86400.');
      expect(message).toContain(
        `(environment values are strings: ${JSON.stringify(value)} is not a number)`,
      );
    },
  );

  it('refuses a numeric string out of range with the range alone', () => {
    const { message } = configurationError(() =>
      resolveIdempotencyOptions({ purge: { batchSize: text('0') } }),
    );
    expect(message).toContain('option "purge.batchSize" is invalid (got "0")');
    expect(message).toContain('from 1 to 100000');
    expect(message).not.toContain('environment values');
  });

  it('per route too: validateRouteOptions (run by @Idempotent()) converts them', () => {
    expect(
      validateRouteGroups({
        responses: { ttlSeconds: text('60') },
        errors: { retryAfterSeconds: text('2') },
      }),
    ).toEqual({
      ttlSeconds: 60,
      retryAfterSeconds: 2,
    });
    const error = configurationError(() =>
      validateRouteGroups({ execution: { lockTimeoutSeconds: text('x') } }),
    );
    expect(error.message).toContain('"x" is not a number');
  });

  it('takes "true" and "false" (any case) for boolean options, "false" for a section', () => {
    const resolved = resolveIdempotencyOptions({
      request: { required: flag('false') },
      metrics: flag('FALSE'),
      openApi: flag(' true '),
      purge: flag('false') as never,
      replayCache: flag('true') as never,
    });
    expect(resolved).toMatchObject({
      required: false,
      metrics: false,
      openApi: true,
      purge: { enabled: false, intervalSeconds: 60, batchSize: 1000 },
      replayCache: { enabled: true, maxEntries: 10_000 },
    });
    expect(validateRouteGroups({ execution: { transactional: flag('true') } })).toEqual({
      transactional: true,
    });
  });

  it.each<[string, IdempotencyModuleOptions]>([
    ['request.required', { request: { required: flag('yes') } }],
    ['metrics', { metrics: flag('1') }],
    ['purge.enabled', { purge: { enabled: flag('on') } }],
    ['purge', { purge: flag('off') as never }],
  ])('refuses another string for %s and says environment values are strings', (option, options) => {
    const { message } = configurationError(() => resolveIdempotencyOptions(options));
    expect(message).toContain(`option "${option}" is invalid`);
    expect(message).toMatch(/environment values are strings: ".*" is not true or false\)/);
  });

  it('a forRootAsync factory that reads ConfigService strings boots with numbers', async () => {
    const env: Record<string, string> = { TTL: '3600', LOCK: '30', PURGE_EVERY: '120' };
    const moduleRef = await Test.createTestingModule({
      imports: [
        IdempotencyModule.forRootAsync({
          useFactory: () => ({
            store: 'memory' as const,
            responses: { ttlSeconds: text(env.TTL) },
            execution: { lockTimeoutSeconds: text(env.LOCK) },
            purge: { enabled: false, intervalSeconds: text(env.PURGE_EVERY) },
          }),
        }),
      ],
    }).compile();
    try {
      const options = moduleRef.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
      expect([
        options.ttlSeconds,
        options.lockTimeoutSeconds,
        options.purge.intervalSeconds,
      ]).toEqual([3600, 30, 120]);
    } finally {
      await moduleRef.close();
    }
  });
});

describe('docs/options.md gives each numeric range', () => {
  /** The list item that explains `name` (`- \`ttlSeconds\`: ...`), its lines joined. */
  function explanation(name: string): string | undefined {
    const lines = readFileSync(join(ROOT, 'docs/options.md'), 'utf8').split('\n');
    const start = lines.findIndex((line) => line.startsWith(`- \`${name}\`:`));
    if (start < 0) return undefined;
    const item = [lines[start]];
    for (let i = start + 1; i < lines.length && lines[i].startsWith('  '); i++) item.push(lines[i]);
    return item.map((line) => line.trim()).join(' ');
  }

  it.each(Object.keys(OPTION_LIMITS) as IdempotencyLimitedOption[])('%s', (option) => {
    const { min, max } = OPTION_LIMITS[option];
    const place = optionPlace(option);
    const item = explanation(place) ?? explanation(place.split('.').pop()!);
    expect(item).toBeDefined();
    expect(item).toContain(`${min} to ${max}`);
  });
});

describe('@Idempotent()', () => {
  it('throws at decoration for a bad option', () => {
    const error = configurationError(() => {
      class Orders {
        @Idempotent({ responses: { ttlSeconds: -1 } })
        create() {
          return 1;
        }
      }
      return Orders;
    });
    expect(error.message).toContain('option "responses.ttlSeconds"');
  });

  it('throws at decoration on a class too', () => {
    configurationError(() => {
      @Idempotent({ responses: { replayHeaders: ['set-cookie'] } })
      class Orders {}
      return Orders;
    });
  });
});

describe('route options merge handler over class over module, field by field', () => {
  const moduleOptions = resolveIdempotencyOptions({
    responses: { ttlSeconds: 100 },
    errors: { retryAfterSeconds: 3 },
  });

  it('mergeRouteOptions', () => {
    const merged = mergeRouteOptions(
      moduleOptions,
      validateRouteGroups({
        responses: { ttlSeconds: 50 },
        request: { required: false },
        execution: { lockTimeoutSeconds: 5 },
      }),
      // As a decorator stores them: flat, an undefined field left in.
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
    @Idempotent({ responses: { ttlSeconds: 50 }, request: { required: false } })
    class OrdersController {
      @Post()
      @Idempotent({ responses: { ttlSeconds: 10 } })
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
      imports: [IdempotencyModule.forRoot({ responses: { ttlSeconds: 0 }, store: 'memory' })],
    }).compile();
    await expect(compiling).rejects.toThrow(IdempotencyConfigurationError);
    await expect(compiling).rejects.toThrow(
      /option "responses.ttlSeconds".*from 0\.1 to 315360000/,
    );
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
      imports: [
        IdempotencyModule.forRoot({ responses: { ttlSeconds: 5 }, store: 'memory', purge: false }),
      ],
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

describe('options grouped by concern: a flat option of 0.1 is refused with its new place', () => {
  it.each([
    ['ttlSeconds', 'responses.ttlSeconds', 60],
    ['lockTimeoutSeconds', 'execution.lockTimeoutSeconds', 30],
    ['scope', 'request.scope', () => 'acct_1'],
    ['retryAfterSeconds', 'errors.retryAfterSeconds', 2],
    ['maxWaiters', 'wait.maxWaiters', 10],
  ])('forRoot({ %s }) fails at compile(), naming %s', async (option, place, value) => {
    const compiling = Test.createTestingModule({
      imports: [IdempotencyModule.forRoot({ store: 'memory', [option]: value } as never)],
    }).compile();
    await expect(compiling).rejects.toThrow(IdempotencyConfigurationError);
    await expect(compiling).rejects.toThrow(`option "${option}" moved to "${place}"`);
  });

  it('@Idempotent({ transactional }) fails at decoration, naming execution.transactional', () => {
    const error = configurationError(() => Idempotent({ transactional: true } as never));
    expect(error.message).toContain('option "transactional" moved to "execution.transactional"');
  });

  it('refuses a field a group does not have, and a module-only field on a route', () => {
    expect(
      configurationError(() => resolveIdempotencyOptions({ responses: { ttl: 5 } as never }))
        .message,
    ).toContain('option "responses.ttl" is invalid');
    expect(
      configurationError(() => Idempotent({ errors: { errorBody: null } as never })).message,
    ).toContain('option "errors.errorBody" is invalid (got null). It is not taken per route');
  });
});
