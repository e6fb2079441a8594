/**
 * The API reference (`npm run docs:api`, TypeDoc from the TSDoc in lib/) builds without a
 * warning: every exported symbol and member is documented, every `{@link}` resolves, and no
 * public signature uses a type the package does not export (or deliberately keeps internal, in
 * typedoc.json's `intentionallyNotExported`). TypeDoc is ESM-only and Jest runs this file as
 * CommonJS, so its Application API runs in a child Node process; nothing is written to disk.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '../..');
/** TypeScript's diagnostics come coloured whatever NO_COLOR says. */
const ANSI_COLOURS = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

/** Bootstraps TypeDoc with typedoc.json, converts and validates; prints a JSON summary last. */
const CHECK = `
import { Application, Logger, LogLevel } from 'typedoc';
const messages = [];
const log = Logger.prototype.log;
Logger.prototype.log = function (message, level) {
  if (level >= LogLevel.Warn) messages.push(message);
  return log.call(this, message, level);
};
const app = await Application.bootstrapWithPlugins({ options: 'typedoc.json' });
const project = await app.convert();
if (project) app.validate(project);
console.log(JSON.stringify({
  converted: project !== undefined,
  warnings: app.logger.warningCount,
  errors: app.logger.errorCount,
  messages,
}));
`;

interface CheckResult {
  converted: boolean;
  warnings: number;
  errors: number;
  messages: string[];
}

function runTypeDoc(): CheckResult {
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', CHECK], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    timeout: 120_000,
  });
  const lastLine = child.stdout.trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(lastLine) as CheckResult;
  } catch {
    throw new Error(
      `TypeDoc did not run (exit ${child.status}):\n${child.stdout}\n${child.stderr}`,
    );
  }
}

describe('API reference (TypeDoc)', () => {
  it('documents every entry point of package.json "exports", with warnings as errors', () => {
    const config = JSON.parse(readFileSync(join(ROOT, 'typedoc.json'), 'utf8'));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    const sources = Object.values<{ types?: string } | string>(pkg.exports)
      .flatMap((target) => (typeof target === 'object' && target.types ? [target.types] : []))
      .map((types) => types.replace(/^\.\/dist\//, '').replace(/\.d\.ts$/, '.ts'));
    expect([...config.entryPoints].sort()).toEqual(sources.sort());
    expect(config.validation).toEqual({
      notExported: true,
      invalidLink: true,
      notDocumented: true,
    });
    expect(config.treatWarningsAsErrors).toBe(true);
  });

  it('builds from the TSDoc with no warning and no error', () => {
    const result = runTypeDoc();
    const report = result.messages.join('\n').replace(ANSI_COLOURS, '');
    expect({
      converted: result.converted,
      warnings: result.warnings,
      errors: result.errors,
      report,
    }).toEqual({ converted: true, warnings: 0, errors: 0, report: '' });
  }, 120_000);
});
