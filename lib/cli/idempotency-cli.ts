import { NestFactory } from '@nestjs/core';
import type {
  DynamicModule,
  INestApplicationContext,
  InjectionToken,
  LogLevel,
  Type,
} from '@nestjs/common';
import { IdempotencyEvents } from '../events/idempotency.events';
import type { IdempotencyEvent } from '../events/idempotency.events';
import { IDEMPOTENCY_STORE_CAPABILITIES } from '../config/idempotency.tokens';
import { IdempotencyOperations } from '../phases/idempotency-operations.service';
import { IdempotencyPurgeService } from '../purge/idempotency-purge.service';
import { withoutSchedules } from '../scheduling/periodic-task';
import type {
  IdempotencyOperatorRecord,
  IdempotencyStoreCapabilities,
  IdempotencyStoreOperator,
} from '../storage/idempotency-store.capabilities';
import { parse, USAGE, UsageError } from './cli-command-line';
import type { Command } from './cli-command-line';

/** Where `runIdempotencyCli()` writes, and how it creates the application. */
export interface IdempotencyCliOptions {
  /**
   * Receives the command's output (JSON or a table), each call a whole text ending in a newline.
   * @defaultValue writes to `process.stdout`
   */
  stdout?: (text: string) => void;
  /**
   * Receives usage help and error messages.
   * @defaultValue writes to `process.stderr`
   */
  stderr?: (text: string) => void;
  /**
   * Nest's log levels for the application context (`false`: no logs).
   * @defaultValue `['error']`
   */
  logger?: LogLevel[] | false;
}

/** What a command printed and its exit code. */
type Outcome = { output: unknown; code: 0 | 1 };

/**
 * The operator tool: runs one command against the application's own module, prints its result
 * and returns an exit code. It creates an application context (no HTTP server) with
 * `NestFactory.createApplicationContext()`, in which the purge, the completer and the job
 * drainer are not scheduled, runs the command, and closes the context. It never calls
 * `process.exit()`: the script does, with the code returned.
 *
 * Reads and writes go through the store's `operator` ability (the TypeORM store has it), each
 * bounded by the store's timeout; `release`, `resolve` and `purge` emit an `operator_action`
 * event on `IdempotencyEvents` for the audit trail, so the app's own subscribers log them.
 *
 * Commands (`--format table` prints a table instead of JSON):
 * - `inspect <scope> <key> [--body]`: one record, without its stored body unless `--body`;
 * - `list in-flight|stuck|abandoned [--limit N]`: stuck is in flight with a lapsed lease;
 * - `release <scope> <key>`: frees a stuck key (refuses a live lease) so a retry runs;
 * - `resolve <scope> <key> [--response-file f.json]`: `IdempotencyOperations.resolveAbandoned()`,
 *   the file holding `{ "status": 200, "body": …, "headers": {…} }`;
 * - `purge`: `IdempotencyPurgeService.purgeExpired()` now, printing the count.
 *
 * @param module - the application's root module (the one `NestFactory.create()` gets)
 * @param argv - the command line after the script's name: `process.argv.slice(2)`
 * @param options - where output goes; Nest's log levels
 * @returns 0 when the command did what it says; 1 when the record was not found, the action
 *   was refused, the store lacks the ability or failed; 2 for a wrong command line (a
 *   `--response-file` whose answer Node.js could not send among them: nothing is stored)
 *
 * @example
 * // src/idempotency-cli.ts
 * import { runIdempotencyCli } from 'nest-idempotency/cli';
 * import { AppModule } from './app.module';
 *
 * void runIdempotencyCli(AppModule, process.argv.slice(2)).then((code) => {
 *   process.exitCode = code;
 * });
 */
export async function runIdempotencyCli(
  module: Type | DynamicModule,
  argv: readonly string[],
  options: IdempotencyCliOptions = {},
): Promise<number> {
  const stdout = options.stdout ?? ((text: string) => void process.stdout.write(text));
  const stderr = options.stderr ?? ((text: string) => void process.stderr.write(text));
  const parsed = await parse(argv).catch((error: unknown) => {
    if (!(error instanceof UsageError)) throw error;
    stderr(`${error.message}\n\n${USAGE}\n`);
  });
  if (!parsed) return 2;
  const { command, table } = parsed;
  if (command.name === 'help') {
    stdout(`${USAGE}\n`);
    return 0;
  }
  let app: INestApplicationContext | undefined;
  try {
    app = await withoutSchedules(() =>
      NestFactory.createApplicationContext(module, {
        logger: options.logger ?? ['error'],
        // A failed bootstrap is an error to report, not a reason to end the process.
        abortOnError: false,
      }),
    );
    const { output, code } = await run(app, command);
    stdout(table ? `${asTable(output)}\n` : `${JSON.stringify(output, null, 2)}\n`);
    return code;
  } catch (error) {
    stderr(`nest-idempotency: ${command.name} failed: ${(error as Error)?.message ?? error}\n`);
    return 1;
  } finally {
    await app?.close();
  }
}

async function run(
  app: INestApplicationContext,
  command: Exclude<Command, { name: 'help' }>,
): Promise<Outcome> {
  switch (command.name) {
    case 'inspect': {
      const { name, scope, key, body } = command;
      const record = await operator(app).inspect(scope, key, body);
      if (record) return { output: shown(record), code: 0 };
      return { output: { error: 'not_found', command: name, scope, key }, code: 1 };
    }
    case 'list': {
      const records = await operator(app).list(command.kind, command.limit);
      return { output: records.map(shown), code: 0 };
    }
    case 'release':
      return act(app, command, async () => {
        const result = await operator(app).releaseStuck(command.scope, command.key);
        if (result === 'released') return { result: 'done' };
        if (result === 'not_found') return { result: 'not_found' };
        return { result: 'refused', reason: result };
      });
    case 'resolve': {
      const { scope, key, resolution } = command;
      const operations = find(app, IdempotencyOperations);
      if (!operations) {
        throw new Error(
          'the application has no IdempotencyPhasesModule: nothing can be abandoned.',
        );
      }
      return act(app, command, async () => {
        if (await operations.resolveAbandoned(scope, key, resolution)) return { result: 'done' };
        // Tell a key that is not abandoned from one that does not exist.
        const record = await operator(app).inspect(scope, key, false);
        return record
          ? { result: 'refused', reason: `not_abandoned (${record.status})` }
          : { result: 'not_found' };
      });
    }
    default: {
      const purge = find(app, IdempotencyPurgeService);
      if (!purge) throw new Error('the application has no IdempotencyModule.');
      return act(app, command, async () => ({ result: 'done', count: await purge.purgeExpired() }));
    }
  }
}

type ActionResult = Pick<
  Extract<IdempotencyEvent, { type: 'operator_action' }>,
  'result' | 'reason' | 'count'
>;

/** Runs an action and emits its `operator_action` event, whatever the result. */
async function act(
  app: INestApplicationContext,
  command: Extract<Command, { name: 'release' | 'resolve' | 'purge' }>,
  action: () => Promise<ActionResult>,
): Promise<Outcome> {
  const target = 'key' in command ? { scope: command.scope, key: command.key } : {};
  const events = find(app, IdempotencyEvents);
  const emit = (result: ActionResult) =>
    events?.emit({ type: 'operator_action', action: command.name, ...target, ...result });
  const outcome = await action().catch((error: unknown) => {
    emit({ result: 'failed', reason: (error as Error)?.message ?? String(error) });
    throw error;
  });
  emit(outcome);
  return {
    output: { action: command.name, ...target, ...outcome },
    code: outcome.result === 'done' ? 0 : 1,
  };
}

function find<T>(app: INestApplicationContext, token: InjectionToken<T>): T | undefined {
  try {
    return app.get<T>(token, { strict: false });
  } catch {
    return undefined;
  }
}

function operator(app: INestApplicationContext): IdempotencyStoreOperator {
  const capabilities = find<IdempotencyStoreCapabilities>(app, IDEMPOTENCY_STORE_CAPABILITIES);
  if (!capabilities) throw new Error('the application has no IdempotencyModule.');
  if (!capabilities.operator) {
    throw new Error(
      "the idempotency store has no operator ability (the TypeORM store has; the memory store doesn't).",
    );
  }
  return capabilities.operator;
}

/** A record as printed: the body (when read) as text when it is UTF-8, else as base64. */
function shown(record: IdempotencyOperatorRecord): Record<string, unknown> {
  const { body, ...rest } = record;
  if (body === undefined) return rest;
  if (body === null) return { ...rest, body: null };
  const text = body.toString('utf8');
  return Buffer.from(text, 'utf8').equals(body)
    ? { ...rest, body: text }
    : { ...rest, bodyBase64: body.toString('base64') };
}

/** A list as a table with a column per field; an object as a table of fields and values. */
function asTable(output: unknown): string {
  const cell = (value: unknown) =>
    value instanceof Date
      ? value.toISOString()
      : value === null || value === undefined
        ? '-'
        : typeof value === 'object'
          ? JSON.stringify(value)
          : String(value);
  let rows: string[][];
  if (Array.isArray(output)) {
    if (output.length === 0) return '(none)';
    const columns = Object.keys(output[0] as object);
    rows = [columns, ...output.map((row) => columns.map((column) => cell((row as any)[column])))];
  } else {
    rows = [['field', 'value'], ...Object.entries(output as object).map(([k, v]) => [k, cell(v)])];
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  const line = (row: string[]) => row.map((text, i) => text.padEnd(widths[i])).join('  ');
  return rows.map((row) => line(row).trimEnd()).join('\n');
}
