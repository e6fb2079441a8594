/**
 * The README's Errors table lists every error code the library answers with, with the status and
 * title the code sends. The list of codes below is checked against `IdempotencyErrorCode` by the
 * compiler, so a new code cannot be left out of it (nor, then, out of the README).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_IDEMPOTENCY_OPTIONS, IdempotencyProblemException } from '../../lib';
import type { IdempotencyErrorCode } from '../../lib';

const CODES = {
  idempotency_key_missing: true,
  idempotency_key_invalid: true,
  idempotency_key_reused: true,
  idempotency_key_in_use: true,
  idempotency_store_unavailable: true,
  idempotency_body_unreadable: true,
  idempotency_scope_invalid: true,
  idempotency_transaction_unavailable: true,
  idempotency_retry_later: true,
  idempotency_operation_abandoned: true,
  idempotency_operation_unavailable: true,
  idempotency_operation_input_invalid: true,
} satisfies Record<IdempotencyErrorCode, true>;

function errorsTable(): Map<string, { status: string; title: string }> {
  const readme = readFileSync(join(__dirname, '../../README.md'), 'utf8');
  const section = readme.split(/^## Errors$/m)[1].split(/^## /m)[0];
  const rows = new Map<string, { status: string; title: string }>();
  for (const line of section.split('\n')) {
    const cells = line
      .trim()
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((cell) => cell.trim());
    const code = /^`(\w+)`$/.exec(cells[0] ?? '');
    if (code && cells.length === 4) rows.set(code[1], { status: cells[1], title: cells[2] });
  }
  return rows;
}

describe('README errors table', () => {
  const table = errorsTable();

  it('has one row per error code and no row for anything else', () => {
    expect([...table.keys()].sort()).toEqual(Object.keys(CODES).sort());
  });

  it.each(Object.keys(CODES) as IdempotencyErrorCode[])(
    'gives the status and title %s is sent with',
    (code) => {
      // The key's titles name the route's header: the table shows them with the default one.
      const { header } = DEFAULT_IDEMPOTENCY_OPTIONS;
      const exception =
        code === 'idempotency_key_missing'
          ? IdempotencyProblemException.keyMissing(header)
          : code === 'idempotency_key_invalid'
            ? IdempotencyProblemException.keyInvalid(header, '')
            : new IdempotencyProblemException(code, '');
      const problem = exception.toProblem('');
      expect(table.get(code)).toEqual({ status: String(problem.status), title: problem.title });
    },
  );
});
