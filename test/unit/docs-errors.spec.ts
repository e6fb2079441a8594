/**
 * The errors table of docs/errors.md ("## Codes") lists every error code the library answers
 * with, with the status and title the code sends. The list of codes below is checked against
 * `IdempotencyErrorCode` by the compiler, so a new code cannot be left out of it (nor, then, out
 * of the table).
 */
import { DEFAULT_IDEMPOTENCY_OPTIONS, IdempotencyProblemException } from '../../lib';
import type { IdempotencyErrorCode } from '../../lib';
import { namedRows } from '../shared/markdown';

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
  idempotency_record_unreadable: true,
  idempotency_request_too_large: true,
  idempotency_response_not_stored: true,
  idempotency_webhook_signature_invalid: true,
} satisfies Record<IdempotencyErrorCode, true>;

/** The first table under "## Codes" in docs/errors.md: code → its status and title. */
function errorsTable(): Map<string, { status: string; title: string }> {
  const rows = new Map<string, { status: string; title: string }>();
  for (const [code, [status, title]] of namedRows('docs/errors.md', '## Codes')) {
    rows.set(code, { status, title });
  }
  return rows;
}

describe('the errors table of docs/errors.md', () => {
  let table: Map<string, { status: string; title: string }>;
  beforeAll(() => {
    table = errorsTable();
  });

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
