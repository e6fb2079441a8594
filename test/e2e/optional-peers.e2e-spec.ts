/**
 * `@nestjs/terminus`, `@nestjs/swagger`, `@opentelemetry/api` and GraphQL's `graphql` and
 * `@nestjs/graphql` (for `nest-idempotency/graphql`) are optional peers, and the
 * database packages (`typeorm`, `@nestjs/typeorm`, `pg`) belong to `nest-idempotency/typeorm`
 * alone: an application on the core with the memory store starts and serves idempotent requests
 * with no warning, and the package root never loads any of them. Run in a child process that
 * makes them unresolvable (test/fixtures/without-optional-peers.ts).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

describe('without the optional peers', () => {
  it('the core starts, serves and replays with no warning, loading none of them', async () => {
    const root = join(__dirname, '../..');
    const { stdout, stderr } = await run(
      process.execPath,
      ['-r', 'ts-node/register/transpile-only', 'test/fixtures/without-optional-peers.ts'],
      { cwd: root, env: { ...process.env, NODE_ENV: 'test' }, timeout: 60_000 },
    );
    expect(stderr.replace(/\(node:\d+\) ExperimentalWarning[^\n]*\n(\(Use[^\n]*\n)?/g, '')).toBe(
      '',
    );
    const result = JSON.parse(stdout);
    expect(result.first).toEqual({ status: 201, body: { n: 1 } });
    expect(result.second).toEqual({ status: 201, body: { n: 1 } });
    expect(result.logged).toEqual([]);
    expect(result.loaded).toEqual([]);
  }, 60_000);
});
