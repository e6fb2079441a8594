/**
 * The module without `isGlobal`: imported by the feature module that declares the decorated
 * controllers (forRoot, and forRootAsync with a `useClass` options factory), or shared by several
 * feature modules through a module that re-exports it — TypeORM in the root module, on Express and
 * Fastify. The bare class imported without forRoot(), or forRoot() imported twice, fails at
 * bootstrap with the fix.
 */
import { Body, Controller, Injectable, Module, Post } from '@nestjs/common';
import type { DynamicModule, INestApplication, Type } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import { CreateIdempotencyRecords1732233600000 } from '../../lib/storage/typeorm';
import {
  IdempotencyConfigurationError,
  IdempotencyContext,
  IdempotencyEvents,
  IdempotencyModule,
  Idempotent,
} from '../../lib';
import type {
  IdempotencyEvent,
  IdempotencyModuleOptions,
  IdempotencyOptionsFactory,
} from '../../lib';
import { createTestDatabase } from '../fixtures/database';
import type { TestDatabase } from '../fixtures/database';
import { ADAPTERS } from '../fixtures/test-app';
import type { AdapterName } from '../fixtures/test-app';

/** A feature service that reads the request's context (it needs the module's exports too). */
@Injectable()
class PaymentsService {
  runs = 0;

  constructor(private readonly idempotency: IdempotencyContext) {}

  async create(body: { amount: number }) {
    this.runs++;
    const [row] = await this.idempotency.entityManager.query(
      'SELECT $1::int AS amount, $2::int AS attempt',
      [body.amount, this.idempotency.identity!.attempt],
    );
    return { ...row, run: this.runs };
  }
}

/** A feature module whose controller is served at `/<path>`, importing `imports`. */
function featureModule(path: string, imports: Array<Type | DynamicModule>): Type {
  @Controller(path)
  class FeatureController {
    constructor(private readonly payments: PaymentsService) {}

    @Post()
    @Idempotent({ execution: { transactional: true } })
    create(@Body() body: { amount: number }) {
      return this.payments.create(body);
    }
  }

  @Module({ imports, controllers: [FeatureController], providers: [PaymentsService] })
  class FeatureModule {}
  return FeatureModule;
}

/** Options from a class, as `forRootAsync({ useClass })` takes them. */
@Injectable()
class IdempotencyConfig implements IdempotencyOptionsFactory {
  createIdempotencyOptions(): Promise<IdempotencyModuleOptions> {
    return Promise.resolve({ purge: false, responses: { ttlSeconds: 600 } });
  }
}

// The interface is what forRootAsync({ useClass }) needs: a misnamed method is a type error.
@Injectable()
// @ts-expect-error createOptions is not createIdempotencyOptions
class MisnamedConfig implements IdempotencyOptionsFactory {
  createOptions(): IdempotencyModuleOptions {
    return {};
  }
}
// @ts-expect-error the class lacks createIdempotencyOptions()
IdempotencyModule.forRootAsync({ useClass: MisnamedConfig });

async function start(
  adapter: AdapterName,
  db: TestDatabase,
  features: Type[],
): Promise<INestApplication> {
  const typeOrm = TypeOrmModule.forRoot({
    type: 'postgres',
    url: db.url,
    migrations: [CreateIdempotencyRecords1732233600000],
    migrationsRun: true,
  });
  const ref = await Test.createTestingModule({ imports: [typeOrm, ...features] }).compile();
  const app =
    adapter === 'fastify'
      ? ref.createNestApplication(new FastifyAdapter(), { logger: false })
      : ref.createNestApplication({ logger: false });
  await app.init();
  if (adapter === 'fastify') await app.getHttpAdapter().getInstance().ready();
  return app;
}

describe.each(ADAPTERS)('IdempotencyModule with isGlobal: false on %s', (adapter) => {
  let db: TestDatabase;
  let app: INestApplication | undefined;
  let seq = 0;
  const newKey = () => `scope-${adapter}-${++seq}`;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** A first request and its retry: stored once, replayed byte for byte. */
  async function expectStoredAndReplayed(path: string) {
    const key = newKey();
    const first = await request(app!.getHttpServer())
      .post(path)
      .set('Idempotency-Key', key)
      .send({ amount: 1999 });
    expect([first.status, first.body]).toEqual([201, { amount: 1999, attempt: 1, run: 1 }]);
    const retry = await request(app!.getHttpServer())
      .post(path)
      .set('Idempotency-Key', key)
      .send({ amount: 1999 });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.text).toBe(first.text);
    const rows = await db.query(
      'SELECT status, response_status FROM idempotency_records WHERE idempotency_key = $1',
      [key],
    );
    expect(rows).toEqual([{ status: 'completed', response_status: 201 }]);
  }

  it('works imported with forRoot() by the feature module that declares the controller', async () => {
    app = await start(adapter, db, [
      featureModule('payments', [IdempotencyModule.forRoot({ isGlobal: false, purge: false })]),
    ]);
    await expectStoredAndReplayed('/payments');
  });

  it('works imported with forRootAsync({ useClass }) by the feature module', async () => {
    app = await start(adapter, db, [
      featureModule('payments', [
        IdempotencyModule.forRootAsync({ isGlobal: false, useClass: IdempotencyConfig }),
      ]),
    ]);
    await expectStoredAndReplayed('/payments');
    const [row] = await db.query(
      `SELECT round(extract(epoch FROM expires_at - updated_at)) AS ttl
         FROM idempotency_records ORDER BY created_at DESC LIMIT 1`,
    );
    expect(Number(row.ttl)).toBe(600);
  });

  it('serves several feature modules from one instance re-exported by a shared module', async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ isGlobal: false, purge: false })],
      exports: [IdempotencyModule],
    })
    class IdempotencySharedModule {}

    app = await start(adapter, db, [
      featureModule('payments', [IdempotencySharedModule]),
      featureModule('refunds', [IdempotencySharedModule]),
    ]);
    const events: IdempotencyEvent[] = [];
    app.get(IdempotencyEvents).subscribe((event) => events.push(event));
    await expectStoredAndReplayed('/payments');
    await expectStoredAndReplayed('/refunds');
    // One instance: its one event stream saw both modules' requests.
    expect(events.map((event) => event.type)).toEqual([
      'executed',
      'replayed',
      'executed',
      'replayed',
    ]);
  });

  it.each([
    [
      'a global forRoot() and a feature module importing it again',
      () => [
        IdempotencyModule.forRoot({
          purge: false,
          request: { scope: (req) => req.user?.accountId },
        }),
        featureModule('payments', [IdempotencyModule.forRoot({ purge: false })]),
      ],
    ],
    [
      'two feature modules with their own isGlobal: false forRoot()',
      () => [
        featureModule('payments', [IdempotencyModule.forRoot({ isGlobal: false, purge: false })]),
        featureModule('refunds', [
          IdempotencyModule.forRootAsync({ isGlobal: false, useClass: IdempotencyConfig }),
        ]),
      ],
    ],
  ])('refuses to start with %s, saying to import it once', async (_case, imports) => {
    // No TypeORM here: a DataSource still connecting when compile() fails would outlive the test.
    const error = await Test.createTestingModule({ imports: imports() })
      .compile()
      .then(
        async (ref) => ref.close(),
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect((error as Error).message).toContain(
      'IdempotencyModule.forRoot() or forRootAsync() is imported 2 times in this application',
    );
    expect((error as Error).message).toContain(
      'Import it once, in the root module (it is global by default): feature modules import ' +
        'nothing and just use @Idempotent()',
    );
  });

  it('fails at bootstrap with the fix when the bare class is imported without forRoot()', async () => {
    // No TypeORM here: a DataSource still connecting when compile() fails would outlive the test.
    const error = await Test.createTestingModule({
      imports: [featureModule('payments', [IdempotencyModule])],
    })
      .compile()
      .then(
        async (ref) => ref.close(),
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(IdempotencyConfigurationError);
    expect((error as Error).message).toMatch(/imported without forRoot\(\) or forRootAsync\(\)/);
    expect((error as Error).message).toMatch(/exports: \[IdempotencyModule\]/);
  });
});
