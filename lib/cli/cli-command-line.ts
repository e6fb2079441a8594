import { readFile } from 'node:fs/promises';
import { sendableResponse, UnsendableResponseError } from '../execution/sendable-response';
import type { AbandonedResolution } from '../phases/idempotency-operations.service';
import type { IdempotencyOperatorListKind } from '../storage/idempotency-store.capabilities';

/**
 * The operator tool's command line: its usage text, the commands it takes, and the parser that
 * turns `argv` into one of them or a `UsageError` (exit code 2).
 */
/** The usage text `runIdempotencyCli()` prints for `--help` and a wrong command line. */
export const USAGE = `Usage: <script> <command> [options]

Commands:
  inspect <scope> <key> [--body]           one record: status, recovery point, attempts, lease
                                           left, expiry, stored status (the body with --body)
  list in-flight|stuck|abandoned [--limit N]
                                           records in flight, stuck (in flight, lease lapsed)
                                           or abandoned; at most N (default 100)
  release <scope> <key>                    frees a stuck key so a retry runs; refuses a live lease
  resolve <scope> <key> [--response-file f.json]
                                           settles an abandoned operation: retries replay the
                                           file's {"status","body","headers"}; without a file
                                           the record is deleted and the key runs again
  purge                                    deletes expired records now, prints the count

Options:
  --format json|table                      output format (default json)
  --help                                   this text

The scope of a key without one is '' (pass "" on the command line).
Exit codes: 0 done, 1 not found, refused or failed, 2 wrong command line.`;

const LIST_KINDS: Record<string, IdempotencyOperatorListKind> = {
  'in-flight': 'in_flight',
  stuck: 'stuck',
  abandoned: 'abandoned',
};

export type Command =
  | { name: 'help' }
  | { name: 'inspect'; scope: string; key: string; body: boolean }
  | { name: 'list'; kind: IdempotencyOperatorListKind; limit: number }
  | { name: 'release'; scope: string; key: string }
  | { name: 'resolve'; scope: string; key: string; resolution: AbandonedResolution }
  | { name: 'purge' };

/** Each command's arguments (how many, as a message names them) and its option besides --format. */
const COMMANDS: Record<string, { arity: number; shape: string; flag?: string }> = {
  inspect: { arity: 2, shape: '<scope> <key>', flag: '--body' },
  list: { arity: 1, shape: 'in-flight, stuck or abandoned', flag: '--limit' },
  release: { arity: 2, shape: '<scope> <key>' },
  resolve: { arity: 2, shape: '<scope> <key>', flag: '--response-file' },
  purge: { arity: 0, shape: 'no arguments' },
};

/** A wrong command line: usage and exit code 2. */
export class UsageError extends Error {}

export async function parse(
  argv: readonly string[],
): Promise<{ command: Command; table: boolean }> {
  const words: string[] = [];
  const flags = new Map<string, string | true>();
  const valued = new Set(['--format', '--limit', '--response-file']);
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i];
    // `--name=value`, or `--name value` for an option that takes one.
    const [name, inline] = word.split(/=(.*)/s, 2);
    if (!word.startsWith('--')) words.push(word);
    else if (name === '--body' || name === '--help') flags.set(name, true);
    else if (!valued.has(name)) throw new UsageError(`Unknown option ${word}.`);
    else if ((inline ?? argv[i + 1]) === undefined) throw new UsageError(`${name} needs a value.`);
    else flags.set(name, inline ?? argv[++i]);
  }
  const format = flags.get('--format') ?? 'json';
  if (format !== 'json' && format !== 'table') {
    throw new UsageError(`--format is json or table, not ${String(format)}.`);
  }
  const table = format === 'table';
  if (flags.has('--help')) return { command: { name: 'help' }, table };
  const [name, ...args] = words;
  if (name === undefined) throw new UsageError('No command given.');
  const spec = COMMANDS[name];
  if (!spec) throw new UsageError(`Unknown command ${name}.`);
  const foreign = [...flags.keys()].find((flag) => flag !== '--format' && flag !== spec.flag);
  if (foreign) throw new UsageError(`${name} takes no ${foreign}.`);
  if (args.length !== spec.arity) throw new UsageError(`${name} takes ${spec.shape}.`);
  const [scope, key] = args;
  switch (name) {
    case 'inspect':
      return { command: { name, scope, key, body: flags.has('--body') }, table };
    case 'list': {
      const kind = LIST_KINDS[args[0]];
      if (!kind) throw new UsageError(`list takes in-flight, stuck or abandoned, not ${args[0]}.`);
      const limitText = String(flags.get('--limit') ?? '100');
      const limit = Number(limitText);
      if (!/^\d+$/.test(limitText) || !(limit >= 1 && limit <= 10_000)) {
        throw new UsageError(`--limit is a whole number from 1 to 10000, not ${limitText}.`);
      }
      return { command: { name, kind, limit }, table };
    }
    case 'release':
      return { command: { name, scope, key }, table };
    case 'resolve': {
      const file = flags.get('--response-file');
      const resolution = typeof file === 'string' ? await responseFrom(file) : {};
      return { command: { name, scope, key, resolution }, table };
    }
    default:
      return { command: { name: 'purge' }, table };
  }
}

/**
 * Reads `{ status, body, headers? }` from a JSON file, refused unless Node.js could send it (the
 * check every stored answer passes), so that nothing is stored that fails every retry.
 */
async function responseFrom(file: string): Promise<AbandonedResolution> {
  let parsed: any;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    throw new UsageError(`--response-file ${file}: ${(error as Error).message}`);
  }
  const { status, body, headers } = parsed ?? {};
  const shaped = typeof parsed === 'object' && parsed !== null && 'body' in parsed;
  try {
    if (!shaped || (headers !== undefined && (typeof headers !== 'object' || headers === null))) {
      throw new UnsendableResponseError('not the shape {"status", "body", "headers"}');
    }
    sendableResponse({ status, body, headers });
  } catch (error) {
    if (!(error instanceof UnsendableResponseError)) throw error;
    throw new UsageError(
      `--response-file ${file} is refused: ${error.why}. It must hold ` +
        '{"status": 100-599, "body": …, "headers": {"name": "value"}} that Node.js can send.',
    );
  }
  return { response: { status, body, headers } };
}
