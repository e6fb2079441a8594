/**
 * A generated application that uses the packed library, driven the way its user would: npm,
 * the app's own build script, `node dist/main`.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../fixtures/free-port';
import { generateApp, renderOwnTemplate } from './nest-app-template';
import type { AppKind } from './nest-app-template';
import { usageFiles } from './readme-usage';

const ROOT = join(__dirname, '../..');

export interface CommandResult {
  code: number | null;
  output: string;
}

/**
 * Runs a command to its end, collecting stdout and stderr.
 * @throws when it does not end within `timeoutMs`
 */
export function run(
  command: string,
  args: string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`${command} ${args.join(' ')} took over ${options.timeoutMs} ms:\n${output}`),
      );
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** The environment of a user's shell: no preload left over from the Nest 12 test leg. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extra };
  delete env.NODE_OPTIONS;
  return env;
}

/** Fails with the command's output when it did not exit 0. */
export function expectSuccess(result: CommandResult, what: string): CommandResult {
  if (result.code !== 0) throw new Error(`${what} failed (exit ${result.code}):\n${result.output}`);
  return result;
}

/**
 * `npm pack` of the repository (its prepack script cleans and builds dist/).
 * @returns the tarball's path
 */
export async function packLibrary(destination: string): Promise<string> {
  expectSuccess(
    await run('npm', ['pack', '--pack-destination', destination], {
      cwd: ROOT,
      timeoutMs: 180_000,
    }),
    'npm pack',
  );
  const tarballs = readdirSync(destination).filter((file) => file.endsWith('.tgz'));
  if (tarballs.length !== 1) throw new Error(`npm pack left ${tarballs.join(', ') || 'nothing'}`);
  return join(destination, tarballs[0]);
}

/** A fresh, empty folder for one run, under the OS temp folder. */
export function workFolder(): string {
  return mkdtempSync(join(tmpdir(), 'nest-idempotency-packaging-'));
}

/** The npm flags of every install: peer ranges are enforced whatever the user's npm config. */
const NPM_INSTALL = ['install', '--no-audit', '--no-fund', '--legacy-peer-deps=false'];

export class ConsumerApp {
  readonly dir: string;
  readonly esm: boolean;

  /** @param folder - the app's folder under `parent` (the kind, unless two apps share one) */
  constructor(
    readonly kind: AppKind,
    parent: string,
    folder: string = kind,
  ) {
    this.dir = join(parent, folder);
    this.esm = kind.endsWith('-esm');
  }

  /** `nest new` without the CLI: the schematic's files, then `npm install`. */
  async generate(): Promise<CommandResult> {
    generateApp(this.kind, this.dir, `${this.kind}-app`);
    return run('npm', NPM_INSTALL, { cwd: this.dir, timeoutMs: 600_000 });
  }

  /**
   * The README's install command, with the packed tarball for `nest-idempotency`: in a Nest 11
   * app `@nestjs/typeorm@11` (npm would otherwise pick 12, ESM-only, which the app's Jest cannot
   * load on Node 20).
   */
  installLibrary(tarball: string): Promise<CommandResult> {
    const typeorm = this.kind === 'nest11-cjs' ? '@nestjs/typeorm@^11' : '@nestjs/typeorm';
    return run('npm', [...NPM_INSTALL, tarball, typeorm, 'typeorm', 'pg'], {
      cwd: this.dir,
      timeoutMs: 600_000,
    });
  }

  /**
   * The core alone: `npm install <tarball>`, no database package named, so npm installs only
   * the peers that are not optional.
   */
  installCore(tarball: string): Promise<CommandResult> {
    return run('npm', [...NPM_INSTALL, tarball], { cwd: this.dir, timeoutMs: 600_000 });
  }

  /** The names in the app's package.json `dependencies`. */
  dependencies(): string[] {
    const pkg = JSON.parse(readFileSync(join(this.dir, 'package.json'), 'utf8'));
    return Object.keys(pkg.dependencies ?? {}).sort();
  }

  /** Whether `node_modules/<name>` exists in the app (installed directly or as a peer). */
  installed(name: string): boolean {
    return existsSync(join(this.dir, 'node_modules', name));
  }

  /** The installed version of a package in the app. */
  version(name: string): string {
    return JSON.parse(readFileSync(join(this.dir, 'node_modules', name, 'package.json'), 'utf8'))
      .version;
  }

  /**
   * Pastes the README's Usage files as they are (its src/app.module.ts replaces the template's;
   * src/payments.support.ts is the README's too), adds the test's client script
   * (src/payments.client.ts), turns on `strict` where the template leaves it off, and runs the
   * app's build script (`nest build`).
   */
  async build(): Promise<CommandResult> {
    for (const file of usageFiles()) {
      writeFileSync(join(this.dir, file.path), file.source);
    }
    copyFileSync(
      join(__dirname, 'payments-client.support.ts'),
      join(this.dir, 'src/payments.client.ts'),
    );
    return this.buildStrict();
  }

  /**
   * Replaces the template's src/app.module.ts with the test's core app
   * (`templates/core-app.module.ts.template`: the memory store, one idempotent POST) and runs
   * the app's build script, `strict` on.
   */
  buildCore(): Promise<CommandResult> {
    writeFileSync(join(this.dir, 'src/app.module.ts'), renderOwnTemplate('core-app.module.ts', {}));
    return this.buildStrict();
  }

  private buildStrict(): Promise<CommandResult> {
    const tsconfigPath = join(this.dir, 'tsconfig.json');
    const tsconfig = JSON.parse(readFileSync(tsconfigPath, 'utf8'));
    tsconfig.compilerOptions.strict = true;
    writeFileSync(tsconfigPath, JSON.stringify(tsconfig, null, 2));
    return run('npm', ['run', 'build'], { cwd: this.dir, timeoutMs: 300_000 });
  }

  /**
   * The app's own e2e runner (`npm run test:e2e`: vitest, or jest) on the test's e2e spec, which
   * boots the README's AppModule and `ScheduleModule` with `@nestjs/testing`, after installing
   * the optional `@nestjs/schedule` (6 in the Nest 11 app, for the reason of installLibrary).
   * The template's own e2e spec (GET /) is removed: the README's AppModule replaced its module.
   * In a Jest app, its e2e config maps the `.js` imports to the sources, as docs/testing.md says.
   */
  async testE2e(databaseUrl: string): Promise<CommandResult> {
    const schedule = this.kind === 'nest11-cjs' ? '@nestjs/schedule@^6' : '@nestjs/schedule';
    const install = await run('npm', [...NPM_INSTALL, schedule], {
      cwd: this.dir,
      timeoutMs: 600_000,
    });
    if (install.code !== 0) return install;
    rmSync(join(this.dir, 'test/app.e2e-spec.ts'));
    if (!this.esm) this.mapJsImportsForJest();
    writeFileSync(
      join(this.dir, 'test/payments.e2e-spec.ts'),
      renderOwnTemplate('payments.e2e-spec.ts', {
        appModule: `./../src/app.module${this.esm ? '.js' : ''}`,
      }),
    );
    return run('npm', ['run', 'test:e2e'], {
      cwd: this.dir,
      timeoutMs: 300_000,
      env: childEnv({ DATABASE_URL: databaseUrl }),
    });
  }

  /** What docs/testing.md tells a Jest user: `./x.js` in an import is `./x.ts` in the sources. */
  private mapJsImportsForJest(): void {
    const configPath = join(this.dir, 'test/jest-e2e.json');
    const config = JSON.parse(readFileSync(configPath, 'utf8'));
    config.moduleNameMapper = { '^(\\.{1,2}/.*)\\.js$': '$1' };
    writeFileSync(configPath, JSON.stringify(config, null, 2));
  }

  /**
   * `node dist/main` (the template's start:prod) on a free port, once it answers HTTP.
   * @param env - added to the environment, e.g. `DATABASE_URL`
   */
  async start(env: Record<string, string>): Promise<RunningApp> {
    const port = await freePort();
    const child = spawn(process.execPath, ['dist/main'], {
      cwd: this.dir,
      env: childEnv({ ...env, PORT: String(port) }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const app = new RunningApp(child, `http://127.0.0.1:${port}`);
    await app.ready(60_000);
    return app;
  }

  /**
   * Runs the built src/payments.client.ts (`nest-idempotency/client`) against a running app.
   * @returns what it printed, parsed
   */
  async runClient(url: string): Promise<unknown> {
    const script = "import('./dist/payments.client.js').then((m) => m.main(process.argv[1]))";
    const result = expectSuccess(
      await run(process.execPath, ['-e', script, url], { cwd: this.dir, timeoutMs: 60_000 }),
      'the client script',
    );
    return JSON.parse(result.output);
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class RunningApp {
  private log = '';
  private readonly exited: Promise<number | string | null>;

  constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.stdout!.on('data', (chunk: Buffer) => (this.log += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (this.log += chunk.toString()));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => resolve(code ?? signal)),
    );
  }

  output(): string {
    return this.log;
  }

  /** Resolves once any HTTP answer comes back; fails if the process exits first. */
  async ready(timeoutMs: number): Promise<void> {
    let exitCode: number | string | null | undefined;
    void this.exited.then((code) => (exitCode = code));
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (exitCode !== undefined) {
        throw new Error(`the app exited (${exitCode}) before answering:\n${this.log}`);
      }
      try {
        await fetch(this.url);
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    throw new Error(`the app did not answer within ${timeoutMs} ms:\n${this.log}`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
  }
}
