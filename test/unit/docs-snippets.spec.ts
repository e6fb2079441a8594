/**
 * Every `ts` block of README.md and of the manual (docs/**\/*.md, without the generated docs/api/)
 * compiles as written. Each Markdown file is one application: its blocks are its files (a block's
 * first line names it: `// src/app.module.ts`, or `// test/…` for a test), type-checked together
 * with the repository's compiler options (strict) and the package's entry points (`nest-idempotency`,
 * `nest-idempotency/typeorm`, …) mapped to `lib/`. Two pages are two applications, so each may
 * have its own `src/app.module.ts`.
 *
 * The only files added are what `nest new` makes (`src/app.module.ts`, `src/app.controller.ts`,
 * `src/app.service.ts`) and what a page leaves to the reader when it imports it without showing it:
 * `src/payments.support.ts` (the request body, the entities and their migration, a payment
 * provider client) and the custom store of docs/testing.md (`src/redis-idempotency.store.ts`).
 * A page that shows one of these files itself (the README shows payments.support.ts) is compiled
 * with its own.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';
import { manualFiles, markdown, repoPath, ROOT } from '../shared/markdown';

/**
 * What `nest new` makes (the Usage section keeps its controller and service; a page showing
 * `src/main.ts` alone imports its module).
 */
const APP_MODULE = `
import { Module } from '@nestjs/common';
import { AppController } from './app.controller';
import { AppService } from './app.service';

@Module({
  imports: [],
  controllers: [AppController],
  providers: [AppService],
})
export class AppModule {}
`;

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

/** The reader's own code that pages import from `./payments.support` without showing it. */
const PAYMENTS_SUPPORT = `
import { Injectable } from '@nestjs/common';
import type { CanActivate } from '@nestjs/common';
import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { MigrationInterface, QueryRunner } from 'typeorm';

@Injectable()
export class ApiKeyGuard implements CanActivate {
  canActivate(): boolean {
    return true;
  }
}

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

/** The reader's own store that docs/testing.md runs the conformance suite against. */
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

/** Added to a page's application when the page does not show the file itself. */
const STAND_INS: Record<string, string> = {
  'src/app.module.ts': APP_MODULE,
  'src/app.controller.ts': APP_CONTROLLER,
  'src/app.service.ts': APP_SERVICE,
  'src/payments.support.ts': PAYMENTS_SUPPORT,
  'src/redis-idempotency.store.ts': REDIS_STORE,
};

/** The Markdown files whose `ts` blocks are checked. */
const PAGES = ['README.md', ...manualFiles()];

interface Snippet {
  /** the file the block names on its first line, e.g. `src/app.module.ts` */
  path: string;
  code: string;
  /** the line of the block's opening fence */
  line: number;
}

/** The page's `ts` blocks, and what is wrong with how they name their files. */
function snippets(page: string): { snippets: Snippet[]; problems: string[] } {
  const found: Snippet[] = [];
  const problems: string[] = [];
  for (const block of markdown(page).blocks) {
    if (!['ts', 'typescript'].includes(block.lang)) continue;
    const firstLine = block.code.split('\n')[0];
    const path = /^\/\/ ((?:[\w.-]+\/)*[\w.-]+\.ts)\s*$/.exec(firstLine)?.[1];
    if (!path || path.split('/').includes('..')) {
      problems.push(
        `${page}:${block.line + 1}: a ts block's first line names its file, as in ` +
          `"// src/app.module.ts"; this one is ${JSON.stringify(firstLine)}`,
      );
      // Still checked, as a file of its own.
      found.push({
        path: `src/block-at-line-${block.line}.ts`,
        code: block.code,
        line: block.line,
      });
      continue;
    }
    const twin = found.find((snippet) => snippet.path === path);
    if (twin) {
      problems.push(
        `${page}:${block.line + 1}: ${path} is shown twice on this page ` +
          `(also at line ${twin.line + 1}); blocks of one page are files of one application`,
      );
      continue;
    }
    found.push({ path, code: block.code, line: block.line });
  }
  return { snippets: found, problems };
}

/** The repository's compiler options, for an application that imports the package by name. */
function compilerOptions(): ts.CompilerOptions {
  const file = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(file.config, ts.sys, ROOT);
  // Each entry point of package.json's exports, at its source: `./typeorm` → lib/storage/typeorm.
  const { exports } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const paths: Record<string, string[]> = {};
  for (const [entry, target] of Object.entries<{ types?: string } | string>(exports)) {
    const types = typeof target === 'object' ? target.types : undefined;
    const source = /^\.\/dist\/(.+)\.d\.ts$/.exec(types ?? '')?.[1];
    if (source) paths[join('nest-idempotency', entry)] = [join(ROOT, `${source}.ts`)];
  }
  return {
    ...options,
    noEmit: true,
    incremental: false,
    // An application's types, not the test runner's.
    types: ['node'],
    paths,
  };
}

describe('the ts blocks of the README and the manual', () => {
  let dir: string;
  let options: ts.CompilerOptions;
  let host: ts.CompilerHost;

  beforeAll(() => {
    // Inside the repository, so that the applications' imports resolve to its node_modules.
    mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
    dir = mkdtempSync(join(ROOT, 'node_modules/.cache/docs-snippets-'));
    options = compilerOptions();
    // One host for every page: lib/ and node_modules are parsed once, not once per page.
    host = ts.createCompilerHost(options);
    const parsed = new Map<string, ts.SourceFile | undefined>();
    const getSourceFile = host.getSourceFile.bind(host);
    host.getSourceFile = (fileName, language, ...rest) => {
      if (fileName.startsWith(dir)) return getSourceFile(fileName, language, ...rest);
      if (!parsed.has(fileName)) parsed.set(fileName, getSourceFile(fileName, language, ...rest));
      return parsed.get(fileName);
    };
    // And module resolution looks each file up on disk once.
    const memo = <T>(look: (path: string) => T) => {
      const seen = new Map<string, T>();
      return (path: string): T => {
        if (path.startsWith(dir)) return look(path);
        if (!seen.has(path)) seen.set(path, look(path));
        return seen.get(path)!;
      };
    };
    host.fileExists = memo(host.fileExists.bind(host));
    host.directoryExists = memo(host.directoryExists!.bind(host));
    host.readFile = memo(host.readFile.bind(host));
    host.realpath = memo(host.realpath!.bind(host));
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("include the README's Usage: four files of a `nest new` app", () => {
    expect(snippets('README.md').snippets.map((snippet) => snippet.path)).toEqual(
      expect.arrayContaining([
        'src/app.module.ts',
        'src/payments.controller.ts',
        'src/payments.service.ts',
        'src/payments.support.ts',
      ]),
    );
  });

  it.each(PAGES)('%s: each names its file and compiles (strict, imports included)', (page) => {
    const { snippets: found, problems } = snippets(page);
    if (!found.length) return;
    const app = join(dir, page);
    /** Where a file of this application comes from, for the messages. */
    const origin = new Map<string, Snippet | undefined>();
    for (const snippet of found) origin.set(snippet.path, snippet);
    for (const [path, code] of Object.entries(STAND_INS)) {
      if (!origin.has(path)) {
        origin.set(path, undefined);
        found.push({ path, code, line: 0 });
      }
    }
    for (const { path, code } of found) {
      mkdirSync(dirname(join(app, path)), { recursive: true });
      writeFileSync(join(app, path), code);
    }

    const program = ts.createProgram({
      rootNames: found.map(({ path }) => join(app, path)),
      options,
      host,
    });
    // The page's files only: lib/ is type-checked by the build.
    const diagnostics = [
      ...program.getOptionsDiagnostics(),
      ...program.getGlobalDiagnostics(),
      ...found.flatMap(({ path }) => {
        const source = program.getSourceFile(join(app, path))!;
        return [
          ...program.getSyntacticDiagnostics(source),
          ...program.getSemanticDiagnostics(source),
        ];
      }),
    ];
    for (const diagnostic of diagnostics) {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      const text = `TS${diagnostic.code}: ${message}`;
      if (!diagnostic.file || diagnostic.start === undefined) {
        problems.push(`${page}: ${text}`);
        continue;
      }
      const at = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
      if (!diagnostic.file.fileName.startsWith(`${app}/`)) {
        const where = `${repoPath(diagnostic.file.fileName)}:${at.line + 1}:${at.character + 1}`;
        problems.push(`${page}: ${where}: ${text}`);
        continue;
      }
      const path = diagnostic.file.fileName.slice(app.length + 1);
      const snippet = origin.get(path);
      problems.push(
        snippet
          ? `${page}:${snippet.line + 1 + at.line}: ${text} ` +
              `(${path}:${at.line + 1}:${at.character + 1}, the block at line ${snippet.line})`
          : `${page}: the stand-in ${path}:${at.line + 1}:${at.character + 1}: ${text}`,
      );
    }
    expect(problems).toEqual([]);
  });
});
