import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** An earlier commit exported and compiled beside the checkout, for `--baseline`. */
export interface BaselineBuild {
  /** The ref as given (`--baseline c1a00aa`). */
  ref: string;
  /** The full commit it resolved to when the run started. */
  commit: string;
  /** The commit's subject line, so a results file says what was compared. */
  subject: string;
  /** Temporary directory holding the commit's tree and its `dist/` (the checkout with `--plain`). */
  dir: string;
  /** `--plain`: the value of `NEST_IDEMPOTENCY_PLAIN` the checkout runs with as the baseline. */
  plain?: string;
}

const git = (root: string, args: string[]) =>
  execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();

/**
 * Exports the tree of `ref` (`git archive`, so neither the checkout nor its index is touched:
 * other work may be going on in it) into a temporary directory, links the checkout's
 * `node_modules` into it, and compiles it with the checkout's TypeScript the way the runner
 * compiles the checkout (`tsc -p tsconfig.build.json`), so both servers run compiled JavaScript
 * against the same dependencies and differ only in the commit's own code.
 *
 * @param root - the checkout (where `.git` and `node_modules` are)
 * @param ref - any commit-ish `git rev-parse` understands
 * @param log - progress lines
 * @throws Error when the ref does not name a commit, or from `tsc` when the commit does not compile
 */
export function buildBaseline(
  root: string,
  ref: string,
  log: (line: string) => void,
): BaselineBuild {
  const commit = git(root, ['rev-parse', '--verify', '--end-of-options', `${ref}^{commit}`]);
  const subject = git(root, ['log', '-1', '--format=%s', commit]);
  const dir = mkdtempSync(join(tmpdir(), 'nest-idempotency-baseline-'));
  try {
    log(`baseline ${ref} (${commit.slice(0, 12)}): exporting to ${dir} and compiling`);
    const tree = execFileSync('git', ['archive', '--format=tar', commit], {
      cwd: root,
      maxBuffer: 1 << 30,
    });
    execFileSync('tar', ['-x', '-C', dir], { input: tree });
    symlinkSync(resolve(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
    execFileSync(
      process.execPath,
      [resolve(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] },
    );
  } catch (error) {
    removeBaseline(dir);
    throw error;
  }
  return { ref, commit, subject, dir };
}

/**
 * `--plain`: the checkout itself as the baseline, run with `NEST_IDEMPOTENCY_PLAIN=<names>`, so
 * the tricks named run on one server and not on the other, in the same rounds.
 * @param root - the checkout, already built
 * @param names - trick names (lib/internals/) or `all`
 */
export function plainBaseline(root: string, names: string): BaselineBuild {
  const commit = git(root, ['rev-parse', 'HEAD']);
  const subject = git(root, ['log', '-1', '--format=%s', commit]);
  return { ref: `NEST_IDEMPOTENCY_PLAIN=${names}`, commit, subject, dir: root, plain: names };
}

/**
 * Deletes the exported tree (the `node_modules` link is removed, not followed).
 * @param dir - `BaselineBuild.dir`
 */
export function removeBaseline(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
