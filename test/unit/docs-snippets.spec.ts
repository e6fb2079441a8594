/**
 * Every `ts` block of the README compiles as written: each block is a file of one application
 * (its first line names it: `// src/app.module.ts`, or `// test/…` for a test), with its own
 * imports, type-checked together with the repository's compiler options (strict) and
 * `nest-idempotency` mapped to `lib/`. The
 * only files added are what `nest new` makes (`src/app.controller.ts`, `src/app.service.ts`) and
 * what the README leaves to the reader: `src/payments.support.ts` (the
 * request body, the entity and its migration, a payment provider client) and the custom store
 * of "Testing your own store" (`src/redis-idempotency.store.ts`).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';

const ROOT = join(__dirname, '../..');

/** What `nest new` makes and the Usage section keeps: the app's own controller and service. */
const APP_CONTROLLER = `
import { Controller, Get } from '@nestjs/common';
import { AppService } from './app.service';

@Controller()
export class AppController {
  constructor(private readonly appService: AppService) {}

  @Get()
  getHello(): string {
    return this.appService.getHello();
  }
}
`;

const APP_SERVICE = `
import { Injectable } from '@nestjs/common';

@Injectable()
export class AppService {
  getHello(): string {
    return 'Hello World!';
  }
}
`;

/** The reader's own code the Usage section imports from `./payments.support`. */
const PAYMENTS_SUPPORT = `
import { Injectable } from '@nestjs/common';
import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { MigrationInterface, QueryRunner } from 'typeorm';

export class CreatePaymentDto {
  amount!: number;
  currency!: string;
  customerId!: string;
}

@Entity('payments')
export class Payment {
  @PrimaryGeneratedColumn() id!: number;
  @Column('integer') amount!: number;
  @Column('text') currency!: string;
  @Column('text') customerId!: string;
  @Column('text') chargeId!: string;
  @Column('text') status!: string;
}

@Entity('receipts')
export class Receipt {
  @PrimaryGeneratedColumn() id!: number;
  @Column('integer') paymentId!: number;
  @Column('text') jobKey!: string;
}

export class CreatePayments1732233600001 implements MigrationInterface {
  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('CREATE TABLE payments (id serial PRIMARY KEY)');
  }
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE payments');
  }
}

@Injectable()
export class PaymentProvider {
  async charge(request: {
    amount: number;
    idempotencyKey: string;
    signal?: AbortSignal;
  }): Promise<{ id: string }> {
    return { id: request.idempotencyKey };
  }
}
`;

/** The reader's own store that "Testing your own store" runs the conformance suite against. */
const REDIS_STORE = `
import { MemoryIdempotencyStore } from 'nest-idempotency';

export class RedisIdempotencyStore extends MemoryIdempotencyStore {
  constructor(readonly url: string) {
    super();
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}
`;

interface Snippet {
  path: string;
  code: string;
  line: number;
}

function readmeSnippets(): Snippet[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => ({
    path: /^\/\/ ((?:src|test)\/[\w./-]+\.ts)\n/.exec(match[1])?.[1] ?? '',
    code: match[1],
    line: readme.slice(0, match.index).split('\n').length,
  }));
}

function compilerOptions(): ts.CompilerOptions {
  const file = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(file.config, ts.sys, ROOT);
  return {
    ...options,
    noEmit: true,
    incremental: false,
    // An application's types, not the test runner's.
    types: ['node'],
    paths: {
      'nest-idempotency': [join(ROOT, 'lib/index.ts')],
      'nest-idempotency/terminus': [join(ROOT, 'lib/health/index.ts')],
      'nest-idempotency/typeorm': [join(ROOT, 'lib/storage/typeorm/index.ts')],
      'nest-idempotency/phases': [join(ROOT, 'lib/phases/index.ts')],
      'nest-idempotency/client': [join(ROOT, 'lib/client/index.ts')],
      'nest-idempotency/testing': [join(ROOT, 'lib/testing/index.ts')],
    },
  };
}

describe('README code', () => {
  const snippets = readmeSnippets();
  let dir: string;

  beforeAll(() => {
    // Inside the repository, so that the application's imports resolve to its node_modules.
    mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
    dir = mkdtempSync(join(ROOT, 'node_modules/.cache/readme-snippets-'));
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('names the file of every ts block on its first line, once each', () => {
    const unnamed = snippets.filter((snippet) => !snippet.path).map((s) => `README.md:${s.line}`);
    expect({ unnamed }).toEqual({ unnamed: [] });
    const paths = snippets.map((snippet) => snippet.path);
    expect(new Set(paths).size).toBe(paths.length);
    expect(paths).toEqual(
      expect.arrayContaining([
        'src/app.module.ts',
        'src/payments.controller.ts',
        'src/payments.service.ts',
        'src/payments-admin.controller.ts',
      ]),
    );
  });

  it('type-checks every ts block as written (strict, imports included)', () => {
    const files = [
      // An unnamed block (the test above fails on it) is still checked, as a file of its own.
      ...snippets.map(({ path, code, line }) => ({ path: path || `src/readme-${line}.ts`, code })),
      { path: 'src/payments.support.ts', code: PAYMENTS_SUPPORT },
      { path: 'src/app.controller.ts', code: APP_CONTROLLER },
      { path: 'src/app.service.ts', code: APP_SERVICE },
      { path: 'src/redis-idempotency.store.ts', code: REDIS_STORE },
    ];
    for (const { path, code } of files) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), code);
    }
    const program = ts.createProgram(
      files.map(({ path }) => join(dir, path)),
      compilerOptions(),
    );
    const diagnostics = ts.getPreEmitDiagnostics(program);
    const report = ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (name) => name,
      getCurrentDirectory: () => dir,
      getNewLine: () => '\n',
    });
    expect(report).toBe('');
  });
});
